#!/usr/bin/env python3
"""Prints the build targets that the tests ctest would run need, one a line.

Usage: test_targets.py BUILD_DIR [CTEST_ARGS...]

For a configured but unbuilt tree: test.sh builds only these where it runs
a part of the suite (aarch64 under qemu, where the rest is half the build).
A test needs every target whose file its command or environment names; a
test executable whose test cases Catch2 lists after it is built stands in
the unbuilt tree as the placeholder test TARGET_NOT_BUILT[-hash].  A target that
a test uses without naming it is not found here, and that test fails:
nothing is skipped silently.
"""
import json
import os
import re
import subprocess
import sys


def target_names(build_dir):
    """The targets the Makefile generator's `help` target lists (test.sh's)."""
    help_text = subprocess.run(
        ["cmake", "--build", build_dir, "--target", "help"],
        check=True, capture_output=True, text=True).stdout
    return {m.group(1) for m in re.finditer(r"^\.\.\. (\S+)", help_text, re.M)}


def tests(build_dir, ctest_args):
    listing = subprocess.run(
        ["ctest", "--test-dir", build_dir, "--show-only=json-v1", *ctest_args],
        check=True, capture_output=True, text=True).stdout
    return json.loads(listing)["tests"]


def words(test):
    """Every argument of the test's command and every environment setting."""
    yield from test.get("command", [])
    for prop in test.get("properties", []):
        if prop["name"] == "ENVIRONMENT":
            yield from prop["value"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build_dir = os.path.abspath(sys.argv[1])
    known = target_names(build_dir)
    needed = set()
    for test in tests(build_dir, sys.argv[2:]):
        placeholder = re.fullmatch(r"(.+)_NOT_BUILT(-[0-9a-f]+)?", test["name"])
        if placeholder:
            needed.add(placeholder.group(1))
        for word in words(test):
            # LD_PRELOAD=a.so:b.so, NAME=path, plain paths.
            for part in re.split(r"[=:;\s]", word):
                if not part.startswith(build_dir + "/"):
                    continue
                base = os.path.basename(part)
                for candidate in (base, re.sub(r"^lib(.*)\.so$", r"\1", base)):
                    if candidate in known:
                        needed.add(candidate)
    if not needed:
        sys.exit("test_targets.py: no test names a target")
    print("\n".join(sorted(needed)))


if __name__ == "__main__":
    main()
