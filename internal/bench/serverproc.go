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

// serverArg is the bench server process's only argument.
const serverArg = "__skillbus-bench-server"

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
	if spec == "" || len(os.Args) != 2 || os.Args[1] != serverArg {
		return // both, so that the variable exported by mistake turns nothing into a server
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
	// (its CPU time is this process's). It answers 0 once it failed, and err says why.
	cpu func() time.Duration
	err error
}

// Err is why the server process's CPU time could not be read, if it could not: the
// figures that count it are then wrong.
func (s *benchServer) Err() error {
	if s.cpu == nil {
		return nil
	}
	s.cpu() // under its lock
	return s.err
}

// sample is the CPU time so far of this process and the server together, and the
// server's part, from one reading of the server's.
func (s *benchServer) sample() (total, server time.Duration) {
	server = s.serverCPU()
	return cpuTime() + server, server
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
	cmd := exec.Command(exe, serverArg)
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
		mu.Lock()
		defer mu.Unlock()
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
	type line struct {
		s   string
		err error
	}
	started := make(chan line, 1)
	go func() {
		s, err := read()
		started <- line{s, err}
	}()
	var first line
	pending := true // the reader has not answered yet
	select {
	case first = <-started:
		pending = false
	case <-ctx.Done():
		first.err = ctx.Err()
	case <-time.After(30 * time.Second):
		first.err = errors.New("no URL after 30s")
	}
	url := first.s
	if first.err != nil || !strings.HasPrefix(url, "nats://") {
		_ = cmd.Process.Kill()
		if pending {
			<-started // its stdout closes with it: the reader is done before Wait
		}
		stop()
		return nil, fmt.Errorf("the server process did not start (%v, %q): %s", first.err, url, stderr.String())
	}
	srv := &benchServer{url: url, stop: stop}
	srv.cpu = func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if srv.err != nil {
			return 0
		}
		if _, err := io.WriteString(stdin, "cpu\n"); err != nil {
			srv.err = fmt.Errorf("the server process: %w", err)
			return 0
		}
		l, err := read()
		if err != nil {
			srv.err = fmt.Errorf("the server process: %w: %s", err, stderr.String())
			return 0
		}
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			srv.err = fmt.Errorf("the server process answered %q for its CPU time", l)
		}
		return time.Duration(n)
	}
	return srv, nil
}
