#!/bin/sh
# Reads the inputs (JSON) on stdin and reports their size.
n=$(wc -c | tr -d ' ')
printf '{"bytes": %s, "execution": "%s"}\n' "$n" "$SKILLBUS_EXECUTION_ID"
