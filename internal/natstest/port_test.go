package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Ports reserved at the same time by this process's goroutines and by another test
// process are all different, outside the kernel's ephemeral range, and free.
func TestFreePortAcrossProcesses(t *testing.T) {
	if os.Getenv("NATSTEST_RESERVE") != "" {
		for range 40 {
			fmt.Println(FreePort(t))
		}
		return
	}
	const n = 40
	child := exec.Command(os.Args[0], "-test.run=^TestFreePortAcrossProcesses$", "-test.count=1")
	child.Env = append(os.Environ(), "NATSTEST_RESERVE=1")
	var out []byte
	var childErr error
	done := make(chan struct{})
	go func() { out, childErr = child.Output(); close(done) }()

	var mu sync.Mutex
	var mine []int
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := FreePort(t)
			mu.Lock()
			mine = append(mine, p)
			mu.Unlock()
		}()
	}
	wg.Wait()
	<-done
	if childErr != nil {
		t.Fatalf("child: %v\n%s", childErr, out)
	}
	var theirs []int
	for _, l := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(l); err == nil {
			theirs = append(theirs, p)
		}
	}
	if len(theirs) != n {
		t.Fatalf("child printed %d ports, want %d:\n%s", len(theirs), n, out)
	}
	lo, hi := portRange()
	seen := map[int]bool{}
	for _, p := range append(mine, theirs...) {
		if seen[p] {
			t.Errorf("port %d given twice", p)
		}
		seen[p] = true
		if p < lo || p >= hi {
			t.Errorf("port %d outside [%d, %d)", p, lo, hi)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		ln.Close()
	}
}
