#!/usr/bin/env python3
"""Fails on an #include that breaks the layer rules of src/snmalloc/README.md.

The README's table has a row per folder: `folder` | holds | may include,
the last a comma-separated list of folders in backticks (empty: none).  A
header may include headers of its own folder and of the folders its row
allows; every folder holding a header must have a row.  Only quoted
includes are checked: those are the tree's own.

Usage: check_includes.py SRC_SNMALLOC_DIR
"""
import os
import re
import sys

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|.*\|([^|]*)\|\s*$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_rules(readme):
    rules = {}
    for line in open(readme, encoding="utf-8"):
        m = ROW.match(line)
        if m:
            rules[m.group(1)] = set(re.findall(r"`([^`]+)`", m.group(2)))
    return rules


def main(root):
    root = os.path.abspath(root)
    rules = read_rules(os.path.join(root, "README.md"))
    if not rules:
        print("check_includes: no layer table in README.md")
        return 1
    errors = []
    checked = 0
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith((".h", ".cc")):
                continue
            path = os.path.join(dirpath, name)
            folder = os.path.relpath(dirpath, root)
            rel = os.path.relpath(path, root)
            if folder not in rules:
                errors.append(f"{rel}: folder '{folder}' has no row in README.md")
                continue
            text = open(path, encoding="utf-8").read()
            for inc in INCLUDE.findall(text):
                target = os.path.normpath(os.path.join(dirpath, inc))
                if not target.startswith(root + os.sep):
                    continue  # outside the library: not a layer
                checked += 1
                to = os.path.relpath(os.path.dirname(target), root)
                if to != folder and to not in rules[folder]:
                    errors.append(f"{rel}: includes {inc} (folder '{to}'), "
                                  f"which '{folder}' may not include")
    for e in errors:
        print(e)
    print(f"check_includes: {checked} includes checked, {len(errors)} broken")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
