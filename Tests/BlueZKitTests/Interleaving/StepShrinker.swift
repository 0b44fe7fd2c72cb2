/// Shrinks a failing list of steps: drops chunks of steps (halves, then quarters, … then single
/// steps) while the list still fails, within a bounded number of replays.
enum StepShrinker {
    static func shrink<Step: Sendable>(
        _ steps: [Step], attempts: Int, stillFails: ([Step]) async -> Bool
    ) async -> [Step] {
        var current = steps
        var left = attempts
        var chunk = max(1, current.count / 2)
        while left > 0 {
            var start = 0
            var removed = false
            while start < current.count, left > 0 {
                let candidate = Array(current[..<start] + current[min(current.count, start + chunk)...])
                left -= 1
                if await stillFails(candidate) {
                    current = candidate
                    removed = true
                } else {
                    start += chunk
                }
            }
            if chunk == 1 && !removed { break }
            chunk = max(1, removed ? min(chunk, current.count / 2) : chunk / 2)
        }
        return current
    }
}
