package natstest

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FreePort returns a loopback TCP port that nothing listens on, for a process the
// test starts later (a nats-server node, `skillbus dev`), which binds it itself.
//
// A port the kernel hands out for "127.0.0.1:0" is free only until something else
// asks: the kernel gives the same ephemeral ports to every process's listeners and
// outgoing connections, so between the probe and the child's bind another test
// binary (go test runs packages in parallel) can take it — a cluster's route then
// reaches another test's cluster. FreePort therefore chooses among the ports below
// (or above) the kernel's ephemeral range, which the kernel never hands out by
// itself, and records each port it gives in a file shared by every test process on
// the machine, under a file lock, so two test processes never get the same one.
// A record expires after reservationTTL.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := reservePort()
	if err != nil {
		t.Fatalf("natstest: reserve a port: %v", err)
	}
	return port
}

const reservationTTL = 20 * time.Minute

var portsMu sync.Mutex // the file lock is per open file; this orders the process's own callers

// openPorts opens the file of reservations every user's test processes share (ports
// are the machine's), made writable for all whatever the umask; where another user
// made it without that, this user's processes share one of their own.
func openPorts() (*os.File, error) {
	name := filepath.Join(os.TempDir(), "skillbus-natstest-ports")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o666)
	if errors.Is(err, os.ErrPermission) {
		return os.OpenFile(fmt.Sprintf("%s-%d", name, os.Getuid()), os.O_RDWR|os.O_CREATE, 0o600)
	}
	if err != nil {
		return nil, err
	}
	_ = f.Chmod(0o666) // only its owner may; others then find it writable
	return f, nil
}

func reservePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	f, err := openPorts()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return 0, err
	}
	defer unlockFile(f)

	now := time.Now()
	given := map[int]bool{}
	var keep []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p, at, ok := strings.Cut(sc.Text(), " ")
		port, err1 := strconv.Atoi(p)
		unix, err2 := strconv.ParseInt(at, 10, 64)
		if !ok || err1 != nil || err2 != nil || now.Sub(time.Unix(unix, 0)) > reservationTTL {
			continue
		}
		given[port] = true
		keep = append(keep, sc.Text())
	}
	lo, hi := portRange()
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if given[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use by something else
		}
		ln.Close()
		keep = append(keep, fmt.Sprintf("%d %d", port, now.Unix()))
		if err := f.Truncate(0); err != nil {
			return 0, err
		}
		if _, err := f.WriteAt([]byte(strings.Join(keep, "\n")+"\n"), 0); err != nil {
			return 0, err
		}
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d after 1000 tries", lo, hi-1)
}

// portRange is [lo, hi): the widest span of ports from 10000 up that lies outside
// the kernel's ephemeral range (Linux's ip_local_port_range, 32768-60999 unless
// changed; elsewhere the IANA range 49152-65535 is assumed).
func portRange() (lo, hi int) {
	elo, ehi := 49152, 65535
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, err1 := strconv.Atoi(f[0])
			z, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && a <= z {
				elo, ehi = a, z
			}
		}
	}
	below, above := elo-10000, 65535-ehi
	if below >= above && below >= 1000 {
		return 10000, elo
	}
	if above >= 1000 {
		return ehi + 1, 65536
	}
	return 10000, 65536 // the whole range is ephemeral: the file still keeps test processes apart
}
