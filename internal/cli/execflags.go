package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

// execLimitFlags are the resource limits of the exec tool's processes: each
// skill's permissions.limits may ask for less, never more.
type execLimitFlags struct {
	processes, openFiles int
	cpu                  time.Duration
	memory, output, uids string
}

func (e *execLimitFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&e.processes, "exec-max-processes", int(tool.DefaultLimits.Processes), "processes and threads one exec call may have at once; a call that reaches it is killed and fails (0: no limit)")
	f.IntVar(&e.openFiles, "exec-max-open-files", int(tool.DefaultLimits.OpenFiles), "open files of each exec process (0: no limit)")
	f.DurationVar(&e.cpu, "exec-max-cpu", 0, "CPU time of each exec process, in whole seconds (0: no limit; the step's timeout still bounds it)")
	f.StringVar(&e.memory, "exec-max-memory", "0", "address space of each exec process, e.g. 4GiB (0: no limit); runtimes that reserve address space up front (Go, Java, Node) need far more than they use")
	f.StringVar(&e.output, "exec-max-output", "1MiB", "bytes of an exec call's stdout, and of its stderr, kept in its result")
	f.StringVar(&e.uids, "exec-uids", fmt.Sprintf("%d-%d", tool.DefaultUIDs.First, tool.DefaultUIDs.First+tool.DefaultUIDs.Count-1),
		"user IDs a root worker runs exec calls as, one per running call (FIRST-LAST); workers on a host may share them")
}

// apply sets the limits on c, or says which flag is wrong.
func (e *execLimitFlags) apply(c *tool.ExecConfig) error {
	limit := func(name string, n int64) (uint64, error) {
		switch {
		case n < 0:
			return 0, usage("--%s %d: want 0 (no limit) or more", name, n)
		case n == 0:
			return tool.NoLimit, nil
		}
		return uint64(n), nil
	}
	var err error
	if c.Limits.Processes, err = limit("exec-max-processes", int64(e.processes)); err != nil {
		return err
	}
	if c.Limits.OpenFiles, err = limit("exec-max-open-files", int64(e.openFiles)); err != nil {
		return err
	}
	if e.cpu%time.Second != 0 {
		return usage("--exec-max-cpu %s: want whole seconds", e.cpu)
	}
	if c.Limits.CPUSeconds, err = limit("exec-max-cpu", int64(e.cpu/time.Second)); err != nil {
		return err
	}
	mem, err := skill.ParseSize(e.memory)
	if err != nil {
		return usage("--exec-max-memory: %v", err)
	}
	if c.Limits.MemoryBytes, err = limit("exec-max-memory", mem); err != nil {
		return err
	}
	out, err := skill.ParseSize(e.output)
	if err != nil || out < 1 || out > math.MaxInt32 {
		return usage("--exec-max-output %q: want a size from 1 byte to 2GiB, e.g. 1MiB", e.output)
	}
	c.MaxOutputBytes = int(out)
	a, b, _ := strings.Cut(e.uids, "-")
	first, err1 := strconv.ParseUint(a, 10, 32)
	last, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil || first == 0 || last < first || last == math.MaxUint32 {
		return usage("--exec-uids %q: want FIRST-LAST, two user IDs from 1 to %d, the first no greater", e.uids, uint32(math.MaxUint32-1))
	}
	c.UIDs = tool.UIDRange{First: uint32(first), Count: uint32(last - first + 1)}
	return nil
}
