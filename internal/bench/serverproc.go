package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillbus/skillbus/pkg/bus"
)

// serverEnv, set in a process's environment, makes it the bench's nats-server: see
// ServeIfChild.
const serverEnv = "SKILLBUS_BENCH_SERVER"

// serverSpec is what the bench tells its server process.
type serverSpec struct {
	StoreDir     string        `json:"store_dir"`
	SyncInterval time.Duration `json:"sync_interval"`
	SyncAlways   bool          `json:"sync_always"`
}

// ServeIfChild returns at once, unless this process was started by the bench to be
// its nats-server (in a process of its own, as in a deployment). It then runs the
// embedded server, prints its URL, answers every "cpu" line on stdin with the
// process's CPU time in nanoseconds, and exits when stdin closes. The skillbus binary
// and the bench's test binary call it first thing.
func ServeIfChild() {
	spec := os.Getenv(serverEnv)
	if spec == "" {
		return
	}
	if err := serveChild(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveChild(spec string, in io.Reader, out io.Writer) error {
	var s serverSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("%s: %w", serverEnv, err)
	}
	srv, err := bus.StartEmbedded(bus.EmbedConfig{Port: -1, StoreDir: s.StoreDir, SyncInterval: s.SyncInterval, SyncAlways: s.SyncAlways})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	if _, err := fmt.Fprintln(out, srv.URL()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() == "cpu" {
			if _, err := fmt.Fprintln(out, int64(cpuTime())); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchServer is the nats-server of one system under measure: embedded in this
// process, or a process of its own.
type benchServer struct {
	url  string
	stop func()
	// cpu is the server process's CPU time so far; nil when the server is embedded
	// (its CPU time is this process's).
	cpu func() time.Duration
}

// URL is the server's client URL.
func (s *benchServer) URL() string { return s.url }

// CPU is the CPU time so far of this process and, when it runs on its own, the
// server's.
func (s *benchServer) CPU() time.Duration { return cpuTime() + s.serverCPU() }

// serverCPU is the server process's CPU time so far; zero when it is embedded.
func (s *benchServer) serverCPU() time.Duration {
	if s.cpu == nil {
		return 0
	}
	return s.cpu()
}

// startServerProcess starts this program again as the bench's nats-server and waits
// for its URL.
func startServerProcess(ctx context.Context, s serverSpec) (*benchServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, _ := json.Marshal(s)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serverEnv+"="+string(spec))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server process: %w", err)
	}
	lines := bufio.NewScanner(stdout)
	var mu sync.Mutex
	read := func() (string, error) {
		if lines.Scan() {
			return lines.Text(), nil
		}
		if err := lines.Err(); err != nil {
			return "", err
		}
		return "", io.ErrUnexpectedEOF
	}
	stop := func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	started := make(chan error, 1)
	var url string
	go func() {
		var err error
		url, err = read()
		started <- err
	}()
	select {
	case err = <-started:
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(30 * time.Second):
		err = errors.New("no URL after 30s")
	}
	if err != nil || !strings.HasPrefix(url, "nats://") {
		stop()
		return nil, fmt.Errorf("the server process did not start (%v, %q): %s", err, url, stderr.String())
	}
	return &benchServer{url: url, stop: stop, cpu: func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if _, err := io.WriteString(stdin, "cpu\n"); err != nil {
			return 0
		}
		l, err := read()
		if err != nil {
			return 0
		}
		n, _ := strconv.ParseInt(l, 10, 64)
		return time.Duration(n)
	}}, nil
}
