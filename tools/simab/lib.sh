# lib.sh is sourced by the simab scripts, from the repository root: work is
# a temporary folder removed on exit with the worktrees made in it, and
# binary NAME REV_OR_PATH prints the path of a gpufleet executable — a
# path to one as is, else the revision built from a clean worktree.
work="$(mktemp -d)"
trap 'for w in "$work"/wt-*; do [ -d "$w" ] && git worktree remove --force "$w"; done; rm -rf "$work"' EXIT

binary() {
  if [ -x "$2" ] && [ -f "$2" ]; then echo "$2"; return; fi
  local rev; rev="$(git rev-parse --verify "$2^{commit}")"
  git worktree add --detach -q "$work/wt-$1" "$rev"
  (cd "$work/wt-$1" && CGO_ENABLED=0 go build -o "$work/$1" ./cmd/gpufleet)
  echo "$work/$1"
}
