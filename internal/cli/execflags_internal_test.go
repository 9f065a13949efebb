package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/tool"
)

func TestExecLimitFlags(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (tool.ExecConfig, error) {
		var e execLimitFlags
		cmd := &cobra.Command{}
		e.register(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			return tool.ExecConfig{}, err
		}
		var c tool.ExecConfig
		return c, e.apply(&c)
	}
	for _, tc := range []struct {
		args []string
		want tool.ExecConfig
	}{
		{nil, tool.ExecConfig{
			Limits:         tool.Limits{CPUSeconds: tool.NoLimit, MemoryBytes: tool.NoLimit, OpenFiles: 1024, Processes: 256},
			MaxOutputBytes: 1 << 20, UIDs: tool.DefaultUIDs,
		}},
		{[]string{"--exec-max-processes", "64", "--exec-max-open-files", "0", "--exec-max-cpu", "1m", "--exec-max-memory", "2GiB", "--exec-max-output", "64KiB", "--exec-uids", "100000-100099"}, tool.ExecConfig{
			Limits:         tool.Limits{CPUSeconds: 60, MemoryBytes: 2 << 30, OpenFiles: tool.NoLimit, Processes: 64},
			MaxOutputBytes: 64 << 10, UIDs: tool.UIDRange{First: 100000, Count: 100},
		}},
	} {
		got, err := parse(tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--exec-max-processes", "-1"}, "--exec-max-processes -1: want 0 (no limit) or more"},
		{[]string{"--exec-max-cpu", "1500ms"}, "--exec-max-cpu 1.5s: want whole seconds"},
		{[]string{"--exec-max-memory", "lots"}, `--exec-max-memory: size "lots": want bytes`},
		{[]string{"--exec-max-output", "0"}, `--exec-max-output "0": want a size from 1 byte to 2GiB`},
		{[]string{"--exec-uids", "5-4"}, `--exec-uids "5-4": want FIRST-LAST`},
		{[]string{"--exec-uids", "0-4"}, `--exec-uids "0-4": want FIRST-LAST`},
	} {
		if _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestTriggerColumn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		types, phrases []string
		want           string
	}{
		{nil, nil, "-"},
		{[]string{"a.b", "c.d"}, nil, "a.b,c.d"},
		{[]string{"suitcase"}, []string{"packing list", "what to pack"}, `suitcase,"packing list","what to pack"`},
		{nil, []string{"book a table"}, `"book a table"`},
		{nil, []string{"one phrase", "two phrase", "three phrase", "four phrase", "five phrase"}, `"one phrase","two phrase","three phrase",+2 more`},
		{nil, []string{strings.Repeat("long ", 20)}, `"long long long long long long long long long l…`},
		{[]string{strings.Repeat("x", 60)}, []string{"a b"}, strings.Repeat("x", 60) + ",+1 more"},
	} {
		if got := triggerColumn(tt.types, tt.phrases); got != tt.want {
			t.Errorf("triggerColumn(%q, %q) = %s, want %s", tt.types, tt.phrases, got, tt.want)
		}
	}
}
