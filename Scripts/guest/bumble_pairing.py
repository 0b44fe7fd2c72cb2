"""bumble_pairing — what the Bumble pairing peers share: the IO capabilities their --io names, and
the Judge, Bumble's pairing delegate, which shows what a person at Bumble's side would see as
events and answers as the test told it.

Events (JSON, through bumble_peer.emit):
  {"event":"passkey","number":N}         Bumble shows N for the other side's user to type
  {"event":"compare","number":N}         Bumble shows N for a numeric comparison
  {"event":"passkeyAsked"}               Bumble is asked to type a passkey
  {"event":"passkeyEntered","number":N}  Bumble typed N (read from the passkey file)
"""

import asyncio
import os

from bumble.pairing import PairingDelegate

from bumble_peer import emit

IO_CAPABILITIES = {
    "display-only": PairingDelegate.IoCapability.DISPLAY_OUTPUT_ONLY,
    "display-yes-no": PairingDelegate.IoCapability.DISPLAY_OUTPUT_AND_YES_NO_INPUT,
    "keyboard-only": PairingDelegate.IoCapability.KEYBOARD_INPUT_ONLY,
    "no-input-no-output": PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT,
}


class Judge(PairingDelegate):
    """Shows the passkey and the number to compare as events; answers comparisons as told; shows
    `passkey` when given (else a random one); types the passkey the test writes to `passkey_file`,
    and without one refuses to type."""

    def __init__(self, io_capability, accepts_comparison, passkey, passkey_file=None):
        super().__init__(io_capability=io_capability)
        self.accepts_comparison = accepts_comparison
        self.passkey = passkey
        self.passkey_file = passkey_file

    async def generate_passkey(self):
        return self.passkey if self.passkey is not None else await super().generate_passkey()

    async def display_number(self, number, digits):
        emit("passkey", number=number)

    async def compare_numbers(self, number, digits):
        emit("compare", number=number)
        return self.accepts_comparison

    async def get_number(self):
        emit("passkeyAsked")
        if not self.passkey_file:
            return None  # nothing to type: the passkey asked of Bumble is refused
        while not os.path.exists(self.passkey_file):
            await asyncio.sleep(0.05)  # the test writes the file once our delegate was shown the passkey
        with open(self.passkey_file, encoding="ascii") as file:
            number = int(file.read().strip())
        emit("passkeyEntered", number=number)
        return number
