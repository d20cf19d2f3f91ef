#!/usr/bin/env bash
# An exec provider for gpufleet that keeps its "machines" as files in a
# directory: a complete implementation of the protocol in
# docs/exec-provider.md, for trying the exec provider and for tests. A
# real script calls a cloud CLI or an IDC's API where this one writes
# files.
#
#   provider.sh acquire|release|list|describe   (one JSON object on stdin)
#
# Environment:
#   GPUFLEET_EXEC_STATE  the state directory (default ./exec-state)
#   EXEC_READY_AFTER     seconds from launch to ready (default 0)
#   EXEC_CAPACITY        the most live machines at once (default 0: no limit)
set -euo pipefail

op=${1:?usage: provider.sh acquire|release|list|describe}
dir=${GPUFLEET_EXEC_STATE:-./exec-state}
ready_after=${EXEC_READY_AFTER:-0}
capacity=${EXEC_CAPACITY:-0}
mkdir -p "$dir/machines" "$dir/tokens"
# One call at a time: the server may call while a previous call's
# timeout is still being handled.
exec 9>"$dir/lock"
if command -v flock >/dev/null; then flock 9; fi

input=$(cat)
# field NAME: a string field of the (flat) input. A real script would use
# jq; the server's input never nests and its strings carry no quotes.
field() { printf '%s' "$input" | sed -n 's/.*"'"$1"'":"\([^"]*\)".*/\1/p'; }
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
fail() { printf '{"error":{"code":"%s","message":"%s"}}\n' "$1" "$2"; exit 0; }

# save: write the current machine's variables (shell-quoted, so the file
# is safe to source).
save() {
	printf 'id=%q\ntoken=%q\noffer=%q\nmode=%q\nstate=%q\nlaunched=%q\nlaunched_epoch=%q\nready_at=%q\nended_at=%q\n' \
		"$id" "$token" "$offer" "$mode" "$state" "$launched" "$launched_epoch" "$ready_at" "$ended_at" >"$dir/machines/$id.tmp"
	mv "$dir/machines/$id.tmp" "$dir/machines/$id"
}

# load ID: read a machine, moving it to ready once ready_after has passed.
load() {
	# shellcheck disable=SC1090
	. "$dir/machines/$1"
	if [ "$state" = provisioning ] && [ $(($(date +%s) - launched_epoch)) -ge "$ready_after" ]; then
		state=ready ready_at=$(now)
		save
	fi
}

# show: the current machine as the protocol's machine object.
show() {
	printf '{"provider_id":"%s","client_token":"%s","offer":"%s","mode":"%s","state":"%s","launched_at":"%s","ready_at":"%s","ended_at":"%s"}' \
		"$id" "$token" "$offer" "$mode" "$state" "$launched" "$ready_at" "$ended_at"
}

case "$op" in
acquire)
	token=$(field client_token)
	[ -n "$token" ] || fail bad_request "no client_token"
	case "$token" in */* | .*) fail bad_request "client_token $token is not a file name" ;; esac
	if [ -f "$dir/tokens/$token" ]; then
		# A token seen before: the same machine again (idempotency).
		load "$(cat "$dir/tokens/$token")"
	else
		if [ "$capacity" -gt 0 ]; then
			live=0
			for f in "$dir"/machines/*; do
				[ -f "$f" ] || continue
				grep -q "^state=released$" "$f" || live=$((live + 1))
			done
			[ "$live" -lt "$capacity" ] || fail no_capacity "all $capacity machines are taken"
		fi
		id="m-$(date +%s%N)-$$"
		offer=$(field offer) mode=$(field mode) state=provisioning
		launched=$(now) launched_epoch=$(date +%s) ready_at="" ended_at=""
		save
		printf '%s' "$id" >"$dir/tokens/$token"
		load "$id"
	fi
	printf '{"machine":%s}\n' "$(show)"
	;;
describe | release)
	id=$(field provider_id)
	case "$id" in "" | */* | .*) fail unknown_machine "no machine ${id:-(empty)}" ;; esac
	[ -f "$dir/machines/$id" ] || fail unknown_machine "no machine $id"
	load "$id"
	if [ "$op" = release ] && [ "$state" != released ]; then
		state=released ended_at=$(now)
		save
	fi
	if [ "$op" = describe ]; then printf '{"machine":%s}\n' "$(show)"; else echo '{}'; fi
	;;
list)
	sep=""
	printf '{"machines":['
	for f in "$dir"/machines/*; do
		[ -f "$f" ] || continue
		case "$f" in *.tmp) continue ;; esac
		load "$(basename "$f")"
		[ "$state" = released ] && continue
		printf '%s%s' "$sep" "$(show)"
		sep=","
	done
	printf ']}\n'
	;;
*)
	echo "provider.sh: unknown operation $op" >&2
	exit 2
	;;
esac
