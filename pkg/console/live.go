package console

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"
)

// hub batches the runs that changed and sends each open runs page the rows it
// shows, a few times a second: a page watching 1,000 updates a second receives four
// messages a second, each with the newest rows, instead of 1,000. A page that cannot
// keep up (its queue of messages is full) is told to reload its list instead.
type hub struct {
	c     *Console
	mu    sync.Mutex
	dirty map[string]struct{}
	subs  map[*liveSub]struct{}
}

type liveSub struct {
	f      Filter
	ch     chan []byte // SSE frames
	lagged bool        // a frame was dropped: the page must reload its list
}

func newHub(c *Console) *hub {
	return &hub{c: c, dirty: map[string]struct{}{}, subs: map[*liveSub]struct{}{}}
}

func (h *hub) mark(ids []string) {
	if len(ids) == 0 {
		return
	}
	h.mu.Lock()
	for _, id := range ids {
		h.dirty[id] = struct{}{}
	}
	h.mu.Unlock()
}

func (h *hub) add(s *liveSub) {
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(s *liveSub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

func (h *hub) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.flush()
		}
	}
}

// flush sends every page the changes since the last flush.
func (h *hub) flush() {
	h.mu.Lock()
	if len(h.dirty) == 0 || len(h.subs) == 0 {
		clear(h.dirty)
		h.mu.Unlock()
		return
	}
	ids := make([]string, 0, len(h.dirty))
	for id := range h.dirty {
		ids = append(ids, id)
	}
	clear(h.dirty)
	subs := make([]*liveSub, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	runs := h.c.idx.Runs(ids)
	for _, s := range subs {
		if s.lagged {
			select {
			case s.ch <- sseFrame("reset", nil):
				s.lagged = false
			default:
			}
			continue
		}
		var rows []liveRow
		for _, r := range runs {
			switch {
			case s.f.match(&r):
				rows = append(rows, liveRow{Run: r})
			case s.f.State != "":
				// It may have left the state the page shows: the page removes
				// the row if it has it.
				f := s.f
				f.State = ""
				if f.match(&r) {
					rows = append(rows, liveRow{Run: r, Gone: true})
				}
			}
		}
		if len(rows) == 0 {
			continue
		}
		// Under a flood only the newest MaxBatch rows are sent: they are the ones a
		// page of the newest runs shows; older rows catch up when the list reloads.
		rows = rows[:min(len(rows), h.c.cfg.MaxBatch)]
		var buf, html bytes.Buffer
		if err := h.c.pages.fragment(&html, "live-rows", rows); err != nil {
			h.c.cfg.Log.Error("console: render live rows", "err", err)
			continue
		}
		buf.Write(sseFrame("runs", html.Bytes()))
		var counts bytes.Buffer
		if err := h.c.pages.fragment(&counts, "counts", h.c.countsView(s.f)); err == nil {
			buf.Write(sseFrame("counts", counts.Bytes()))
		}
		select {
		case s.ch <- buf.Bytes():
		default:
			s.lagged = true
		}
	}
}

type liveRow struct {
	Run
	Gone bool
}

// sseFrame frames one server-sent event; every line of data gets its own "data:".
func sseFrame(event string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	if len(data) == 0 {
		b.WriteString("data: \n")
	}
	for line := range bytes.Lines(data) {
		b.WriteString("data: ")
		b.Write(bytes.TrimRight(line, "\r\n"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// live streams the changes of the runs a list page shows, as server-sent events:
// "runs" carries rows to merge, "counts" the counts per state, "reset" asks the
// page to reload its list.
func (c *Console) live(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte("retry: 2000\n: live runs\n\n")); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	s := &liveSub{f: f, ch: make(chan []byte, 8)}
	c.hub.add(s)
	defer c.hub.remove(s)
	ping := time.NewTicker(20 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-s.ch:
			if _, err := w.Write(b); err != nil {
				return
			}
		case <-ping.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}
