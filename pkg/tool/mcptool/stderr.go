package mcptool

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// stderrLog receives a stdio server's stderr: each line goes to the log, and
// the last tailBytes are kept for the error when the server fails to start or
// dies.
type stderrLog struct {
	log    *slog.Logger
	server string

	mu   sync.Mutex
	line []byte
	tail []byte
}

const (
	tailBytes    = 1 << 10
	maxLineBytes = 4 << 10
)

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tail = append(w.tail, p...)
	if len(w.tail) > tailBytes {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-tailBytes:]...)
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.emit(w.line[:i])
		w.line = w.line[i+1:]
	}
	if len(w.line) > maxLineBytes {
		w.emit(w.line)
		w.line = w.line[:0]
	}
	return len(p), nil
}

func (w *stderrLog) emit(line []byte) {
	s := strings.TrimRight(strings.ToValidUTF8(string(line), "\uFFFD"), "\r")
	if s != "" {
		w.log.Debug("mcp server stderr", "server", w.server, "line", s)
	}
}

// Tail returns the end of what the server wrote, on one line, or "".
func (w *stderrLog) Tail() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(w.tail), "\uFFFD")), " ")
}
