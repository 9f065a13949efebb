//go:build linux

package tool

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The children of a process are found through /proc/<pid>/task/<tid>/children and,
// where the kernel has no such file, by their parent in /proc/<child>/stat: both
// ways give the same processes, and a process with live children has them.
func TestChildrenOfAProcess(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	var fromFile []string
	deadline := time.Now().Add(10 * time.Second)
	for len(fromFile) < 2 && time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
		if err != nil {
			t.Fatalf("this kernel has no children file (%v): the fallback is all there is", err)
		}
		fromFile = strings.Fields(string(b))
		time.Sleep(5 * time.Millisecond)
	}
	byParent, err := childrenByParent(pid)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fromFile)
	slices.Sort(byParent)
	if len(fromFile) != 2 || !slices.Equal(fromFile, byParent) {
		t.Fatalf("children file %v, by parent %v; want the same two", fromFile, byParent)
	}
	if !childrenLive(pid) {
		t.Error("two sleeping children, yet none live")
	}
	// Once they are killed (zombies until the shell reaps them, then gone), none is.
	for _, c := range fromFile {
		n, _ := strconv.Atoi(c)
		_ = syscall.Kill(n, syscall.SIGKILL)
	}
	for childrenLive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if childrenLive(pid) {
		t.Error("killed children still count as live")
	}
}
