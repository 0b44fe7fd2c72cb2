// Being written: the D-Bus layer benchmark (see Scripts/benchmark-dbus).
print("dbus-benchmark: not built yet")
