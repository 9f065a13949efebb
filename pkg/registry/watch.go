package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/skillbus/skillbus/pkg/skill"
)

// ErrStarted is returned by Start on a registry already started (or stopped).
var ErrStarted = errors.New("registry: already started")

// Start syncs once, starts the skillbus-registry service, and keeps the catalog in
// step with the files until Stop: every change under the roots is synced after
// Config.Debounce of quiet. It returns once the first sync is published; an error
// means nothing is running.
func (r *Registry) Start(ctx context.Context) error {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if r.started {
		return ErrStarted
	}
	fw, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return fmt.Errorf("registry: watch: %w", err)
	}
	w := &watch{r: r, fw: fw, pending: map[string]bool{}, fileRoots: map[string]bool{}, visited: map[string]bool{}}
	// Watch before the first sync, so that nothing changed during it is missed.
	w.addRoots()
	if _, err := r.Sync(ctx); err != nil {
		fw.Close()
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	svc, err := r.serve(runCtx)
	if err != nil {
		cancel()
		fw.Close()
		return err
	}
	// The service's subscriptions reach the server with the next flush: wait for
	// it, so that a client asking as soon as Start returns is answered, not told
	// that no registry serves.
	if err := r.cfg.Bus.Flush(runCtx); err != nil {
		r.cfg.Log.Warn("registry: the service's subscriptions are not confirmed yet; it answers once they reach the server", "err", err)
	}
	r.started, r.cancel, r.done, r.fw, r.svc = true, cancel, make(chan struct{}), fw, svc
	go w.loop(runCtx)
	return nil
}

// Stop stops watching and serving, waiting for a sync in progress to end. It is
// idempotent, and safe on a registry never started.
func (r *Registry) Stop() {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if !r.started || r.stopped {
		r.started, r.stopped = true, true // a stopped registry cannot start
		return
	}
	r.stopped = true
	_ = r.svc.Stop()
	r.cancel()
	<-r.done
	r.fw.Close()
}

// Resync asks a started registry to sync everything now (SIGHUP); it does not wait.
func (r *Registry) Resync() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// watch follows the roots with fsnotify.
type watch struct {
	r         *Registry
	fw        *fsnotify.Watcher
	pending   map[string]bool // roots that do not exist (yet), by root
	fileRoots map[string]bool // roots that are a single skill file: their directory is watched
	visited   map[string]bool // directories watched, by real path
	polling   bool            // watches could not be added: sync on a timer instead
}

// addRoots watches every root: existing directories recursively, the directory of
// a root that is a file, and the nearest existing parent of a root that does not
// exist yet.
func (w *watch) addRoots() {
	for _, root := range w.r.cfg.Roots {
		w.addRoot(root)
	}
}

func (w *watch) addRoot(root string) {
	for {
		info, err := os.Stat(root)
		switch {
		case err == nil && info.IsDir():
			delete(w.pending, root)
			w.addTree(root)
			return
		case err == nil:
			delete(w.pending, root)
			w.fileRoots[root] = true
			w.add(filepath.Dir(root))
			return
		}
		w.pending[root] = true
		// A directory made below the ancestor before its watch was in place sent it
		// no event (os.MkdirAll makes a path's directories one after another): look
		// again, and go on down while the path toward the root is there.
		p, ok := w.watchParent(root)
		if !ok {
			return
		}
		rel, err := filepath.Rel(p, root)
		if err != nil {
			return
		}
		next, _, _ := strings.Cut(rel, string(filepath.Separator))
		if info, err := os.Stat(filepath.Join(p, next)); err != nil || !info.IsDir() {
			return // not there yet: its creation is an event of the watch on p
		}
	}
}

// watchParent watches the nearest existing ancestor of a missing root, to see it
// appear, and returns it; ok is false when no ancestor could be watched.
func (w *watch) watchParent(root string) (dir string, ok bool) {
	for p := filepath.Dir(root); ; p = filepath.Dir(p) {
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			return p, w.add(p)
		}
		if filepath.Dir(p) == p {
			return "", false
		}
	}
}

// addTree watches dir and every directory below it that Discover would read:
// hidden ones are skipped, symlinked ones followed once, and only where Discover
// follows them (skill.FollowLink): not to a directory outside the root that is not
// a skill.
func (w *watch) addTree(dir string) {
	bound := dir
	for _, root := range w.r.cfg.Roots {
		if within(dir, root) {
			bound = root
			break
		}
	}
	if real, err := filepath.EvalSymlinks(bound); err == nil {
		bound = real
	}
	w.addTreeIn(dir, bound)
}

func (w *watch) addTreeIn(dir, bound string) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil || w.visited[real] {
		return
	}
	if !skill.FollowLink(bound, real) {
		return
	}
	if !within(real, bound) {
		bound = real // a skill directory linked in from elsewhere: only it
	}
	w.visited[real] = true
	if !w.add(dir) {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			w.addTreeIn(p, bound)
		case e.Type()&fs.ModeSymlink != 0:
			if info, err := os.Stat(p); err == nil && info.IsDir() {
				w.addTreeIn(p, bound)
			}
		}
	}
}

func (w *watch) add(dir string) bool {
	err := w.fw.Add(dir)
	switch {
	case err == nil:
		return true
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE):
		if !w.polling {
			w.r.cfg.Log.Error("registry: cannot watch more directories; syncing everything every poll interval instead (raise fs.inotify.max_user_watches)",
				"dir", dir, "err", err, "poll", w.r.cfg.PollInterval)
		}
		w.polling = true
	case !errors.Is(err, os.ErrNotExist):
		w.r.cfg.Log.Warn("registry: cannot watch a directory", "dir", dir, "err", err)
	}
	return false
}

// relevant reports whether a change at p can matter to the catalog, and whether it
// concerns a root that did not exist.
func (w *watch) relevant(p string) (ok, forPending bool) {
	for root := range w.pending {
		if within(root, p) {
			return true, true
		}
	}
	if w.fileRoots[p] {
		return true, false
	}
	for _, root := range w.r.cfg.Roots {
		if w.fileRoots[root] || !within(p, root) {
			continue
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			continue
		}
		// Discover skips hidden entries: editors' swap and backup files, .git.
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			if strings.HasPrefix(part, ".") && part != "." {
				return false, false
			}
		}
		return true, false
	}
	return false, false
}

// dataSwap reports whether p is the ..data link at the top of a root, and if so
// watches what it now points at. Kubernetes updates a ConfigMap volume by pointing
// that hidden link at a new hidden directory: the skills (reached through links
// into ..data) all change at once, and the old directories watched go away.
func (w *watch) dataSwap(p string) bool {
	if filepath.Base(p) != "..data" {
		return false
	}
	for _, root := range w.r.cfg.Roots {
		if filepath.Clean(root) == filepath.Dir(p) {
			if real, err := filepath.EvalSymlinks(root); err == nil {
				delete(w.visited, real)
			}
			w.addTree(root)
			return true
		}
	}
	return false
}

func (w *watch) loop(ctx context.Context) {
	r := w.r
	defer close(r.done)
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	gc := time.NewTicker(r.cfg.GCInterval)
	defer gc.Stop()
	var poll <-chan time.Time
	if w.polling {
		t := time.NewTicker(r.cfg.PollInterval)
		defer t.Stop()
		poll = t.C
	}
	changed := map[string]bool{}
	full := false
	var first time.Time // of the changes not synced yet
	schedule := func() {
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		// Wait for quiet, but not forever while changes keep coming.
		quiet.Reset(min(r.cfg.Debounce, first.Add(10*r.cfg.Debounce).Sub(now)))
	}
	sync := func() {
		paths := make([]string, 0, len(changed))
		for p := range changed {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		clear(changed)
		wasFull := full
		full, first = false, time.Time{}
		var rep *Report
		var err error
		if wasFull {
			rep, err = r.Sync(ctx)
		} else {
			rep, err = r.syncPaths(ctx, paths)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.cfg.Log.Error("registry: sync failed; retrying", "err", err)
			full = true
			schedule()
			return
		}
		if len(rep.Retry) > 0 {
			full = true
			schedule()
		}
		if r.cfg.OnSync != nil {
			r.cfg.OnSync(rep)
		}
	}

	// Collections run beside the syncs: listing every object takes a while.
	gcDone := make(chan struct{})
	defer func() { <-gcDone }()
	go func() {
		defer close(gcDone)
		for {
			if _, err := r.GC(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Log.Error("registry: gc", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-gc.C:
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			p := filepath.Clean(ev.Name)
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if w.dataSwap(p) {
				full = true
				schedule()
				continue
			}
			ok, forPending := w.relevant(p)
			if !ok {
				continue
			}
			if forPending {
				for root := range w.pending {
					w.addRoot(root)
				}
				full = true
			} else if ev.Has(fsnotify.Create) {
				if info, err := os.Stat(p); err == nil && info.IsDir() {
					w.addTree(p)
				}
			}
			if slices.Contains(r.cfg.Roots, p) && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
				w.addRoot(p) // gone: watch for it to come back
				full = true
			}
			changed[p] = true
			schedule()
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			r.cfg.Log.Warn("registry: watch", "err", err)
			full = true // events may have been lost
			schedule()
		case <-quiet.C:
			sync()
		case <-r.wake:
			full = true
			sync()
		case <-poll:
			full = true
			sync()
		}
	}
}
