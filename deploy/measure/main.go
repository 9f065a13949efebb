// Command measure publishes triggers of the example skill hello to a running
// skillbus (registry, router and worker started as separate processes, see run.sh),
// at most 2,000 unfinished at once, and prints each process's CPU time and peak
// resident memory (VmHWM) from /proc: the figures the Kubernetes requests and
// limits in deploy/base/skillbus.yaml are set from.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

type proc struct {
	name string
	pid  int
}

func ticks(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100
}

func status(pid int, key string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+":") {
			return strings.TrimSpace(strings.TrimPrefix(l, key+":"))
		}
	}
	return "?"
}

func main() {
	url := flag.String("url", "", "NATS URL")
	n := flag.Int("n", 20000, "triggers to publish")
	par := flag.Int("par", 64, "publishers at once")
	pids := flag.String("pids", "", "processes to measure: name=pid,...")
	flag.Parse()
	var ps []proc
	for _, kv := range strings.Split(*pids, ",") {
		k, v, _ := strings.Cut(kv, "=")
		p, _ := strconv.Atoi(v)
		ps = append(ps, proc{k, p})
	}
	for _, p := range ps {
		fmt.Printf("idle %-9s RSS %s\n", p.name, status(p.pid, "VmRSS"))
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		panic(err)
	}
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		panic(err)
	}
	var done atomic.Int64
	sub, _ := nc.Subscribe(b.Subjects.EventKind(events.TypeExecutionCompleted), func(*nats.Msg) { done.Add(1) })
	defer sub.Unsubscribe()
	start := map[string]float64{}
	for _, p := range ps {
		start[p.name] = ticks(p.pid)
	}
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	cl := client.New(b)
	stamp := t0.UnixNano()
	for range *par {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(*n) {
					return
				}
				for done.Load() < i-2000 { // at most ~2000 unfinished
					time.Sleep(time.Millisecond) // a load generator's pacing
				}
				_, err := cl.Publish(context.Background(), client.Trigger{Skill: "hello", ID: fmt.Sprintf("m-%d-%d", stamp, i), Data: []byte(`{"name":"Ada"}`)})
				if err != nil {
					fmt.Println("publish:", err)
				}
			}
		})
	}
	wg.Wait()
	for done.Load() < int64(*n) {
		time.Sleep(10 * time.Millisecond)
	}
	el := time.Since(t0).Seconds()
	fmt.Printf("%d executions in %.1fs (%.0f/s)\n", *n, el, float64(*n)/el)
	for _, p := range ps {
		cpu := ticks(p.pid) - start[p.name]
		fmt.Printf("load %-9s CPU %.1fs = %.2f cores   RSS peak (VmHWM) %s   RSS now %s\n", p.name, cpu, cpu/el, status(p.pid, "VmHWM"), status(p.pid, "VmRSS"))
	}
}
