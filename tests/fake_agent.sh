#!/bin/sh
# fake_agent.sh HOST COMMAND...: stands in for ssh in test_launcher's
# jobs over several "hosts", all of them this machine: drops the host
# name and runs the command here.  It writes its arguments, one a line,
# to $TIDE_FAKE_AGENT_LOG when set, so the test can check what an agent
# is given (and that the job's token is never among it).
if [ -n "$TIDE_FAKE_AGENT_LOG" ]; then
  printf '%s\n' "$@" >>"$TIDE_FAKE_AGENT_LOG"
fi
shift
exec "$@"
