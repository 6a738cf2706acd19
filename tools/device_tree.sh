#!/bin/sh
# Leave benchmarks/results/ out of what the device tool sends, and put it back after.
#
#   sh tools/device_tree.sh off     # before a call of the lent GPU machine
#   sh tools/device_tree.sh on      # after it (also safe to run when already on)
#   sh tools/device_tree.sh status  # which state the checkout is in, and the tree's size
#
# The device tool sends tracked and untracked-not-ignored files, at most 64 MiB, and
# benchmarks/results/ passed 63 MB on 2026-12-06. "off" takes the folder out of git's
# index (the files stay on disk) and ignores it through .git/info/exclude; "on" restores
# both. While it is off, `git commit -a` would record the results as deleted: this
# script refuses "off" with staged changes, and "on" puts the index back as HEAD has it
# for benchmarks/results/ only.
set -eu
cd "$(git rev-parse --show-toplevel)"
exclude="$(git rev-parse --git-path info/exclude)"
# two lines (gitignore has no comments after a pattern): the marker, then the pattern
mark="# device_tree.sh off: benchmarks/results/ is left out"
pattern="/benchmarks/results/"
is_off() { [ -f "$exclude" ] && grep -qxF "$mark" "$exclude"; }
size() {
    git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1
}
case "${1:-}" in
    off)
        if is_off; then echo "already off"; exit 0; fi
        if ! git diff --cached --quiet; then
            echo "device_tree.sh: staged changes: commit or unstage them first" >&2
            exit 2
        fi
        mkdir -p "$(dirname "$exclude")"
        printf '%s\n%s\n' "$mark" "$pattern" >> "$exclude"
        git rm -r -q --cached benchmarks/results
        echo "off: benchmarks/results/ left out; tracked files now $(size) bytes" ;;
    on)
        if [ -f "$exclude" ]; then
            # drop the marker and the pattern line right after it
            awk -v m="$mark" -v p="$pattern" '$0 == m {skip = 1; next}
                skip && $0 == p {skip = 0; next} {skip = 0; print}' "$exclude" \
                > "$exclude.tmp"
            mv "$exclude.tmp" "$exclude"
        fi
        git reset -q -- benchmarks/results
        echo "on: benchmarks/results/ tracked again; tracked files $(size) bytes" ;;
    status)
        if is_off; then echo "off"; else echo "on"; fi
        echo "tracked files: $(size) bytes (the device tool's limit: 67108864 with carried paths)" ;;
    *)
        echo "usage: sh tools/device_tree.sh off|on|status" >&2
        exit 2 ;;
esac
