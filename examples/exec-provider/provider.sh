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
#   GPUFLEET_EXEC_AGENT  the gpufleet binary: when set, each machine that
#                        becomes ready starts a real agent on this host
#                        (fake GPUs sized to its offer) that joins the
#                        server as the machine's lease, and release stops
#                        it. It joins with the machine's bootstrap from the
#                        acquire input (server_url, lease_id, join_token:
#                        a one-time token for that lease only), kept in
#                        the machine's file (owner-only) until it boots;
#                        GPUFLEET_URL and GPUFLEET_AGENT_TOKEN (a shared
#                        agent token) serve when the input has none.
set -euo pipefail
umask 077 # the machines' files hold their join tokens

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
	printf 'id=%q\ntoken=%q\noffer=%q\nmode=%q\nstate=%q\nlaunched=%q\nlaunched_epoch=%q\nready_at=%q\nended_at=%q\nagent_pid=%q\nserver_url=%q\njoin_token=%q\n' \
		"$id" "$token" "$offer" "$mode" "$state" "$launched" "$launched_epoch" "$ready_at" "$ended_at" "$agent_pid" "$server_url" "$join_token" >"$dir/machines/$id.tmp"
	mv "$dir/machines/$id.tmp" "$dir/machines/$id"
}

# load ID: read a machine, moving it to ready once ready_after has passed
# (and starting its agent then).
load() {
	agent_pid="" server_url="" join_token=""
	# shellcheck disable=SC1090
	. "$dir/machines/$1"
	if [ "$state" = provisioning ] && [ $(($(date +%s) - launched_epoch)) -ge "$ready_after" ]; then
		state=ready ready_at=$(now)
		start_agent
		save
	fi
}

# start_agent: the machine's "boot": a real agent process in its own
# session (it outlives this call; fd 9, the lock, is not passed on).
start_agent() {
	[ -n "${GPUFLEET_EXEC_AGENT:-}" ] || return 0
	mkdir -p "$dir/agents/$id"
	local cred=(--join-token "$join_token")
	[ -n "$join_token" ] || cred=(--token "${GPUFLEET_AGENT_TOKEN:?no join_token in the input and no GPUFLEET_AGENT_TOKEN}")
	setsid "$GPUFLEET_EXEC_AGENT" agent --server "${server_url:-${GPUFLEET_URL:?}}" "${cred[@]}" \
		--lease "$token" --agent-id "agent-$id" --offer "$offer" --gpu-source fake \
		--data-dir "$dir/agents/$id" --heartbeat-interval 1s --sample-interval 1s \
		</dev/null >"$dir/agents/$id.log" 2>&1 9>&- &
	agent_pid=$!
}

# stop_agent: the machine's shutdown: its agent's session gets SIGTERM
# (the agent stops its jobs within their grace).
stop_agent() {
	[ -n "$agent_pid" ] || return 0
	kill -TERM -- "-$agent_pid" 2>/dev/null || kill -TERM "$agent_pid" 2>/dev/null || true
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
		# A token seen before: the same machine again (idempotency). A
		# machine not yet booted takes the retry's join token (the
		# server's newest; the one before stays good until it expires).
		load "$(cat "$dir/tokens/$token")"
		if [ "$state" = provisioning ] && [ -n "$(field join_token)" ]; then
			join_token=$(field join_token) server_url=$(field server_url)
			save
		fi
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
		launched=$(now) launched_epoch=$(date +%s) ready_at="" ended_at="" agent_pid=""
		server_url=$(field server_url) join_token=$(field join_token)
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
		stop_agent
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
