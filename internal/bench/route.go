package bench

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/selector/selectortest"
	"github.com/skillbus/skillbus/pkg/skill"
)

// RouteResult are the routing figures: deciding a text request against a catalog,
// and updating the index when one skill changes.
type RouteResult struct {
	Skills               int
	Build                time.Duration
	P50, P99             time.Duration
	UpdateP50, UpdateMax time.Duration
}

// RunRoute measures the selector on a generated catalog of n skills with one-line
// descriptions: requests routes of generated requests, and updates edits of one skill.
func RunRoute(n, requests, updates int) RouteResult {
	skills := selectortest.Catalog(n, 1)
	// A third are workflows with inputs, which a text request's data must fit.
	for i := 0; i < len(skills); i += 3 {
		skills[i].Workflow = &skill.Workflow{Inputs: []skill.Input{{Name: "query", Type: "string"}, {Name: "days", Type: "integer", Default: 3}}}
	}
	res := RouteResult{Skills: n}
	start := time.Now()
	x := selector.New(selector.Config{})
	x.Sync(skills)
	res.Build = time.Since(start)
	cases := selectortest.Requests(skills, requests, 3)
	// Each request as a client sends it, with its data, so that a skill's
	// inputs are checked against it as the router does.
	reqs := make([]selector.Request, len(cases))
	for i, c := range cases {
		reqs[i] = selector.Request{Type: selector.RequestType, Text: c.Query, Data: map[string]any{"query": c.Query}}
	}
	for _, r := range reqs[:min(len(reqs), 200)] { // warm the scratch buffers
		_, _ = x.Select(r, selector.Env{})
	}
	lat := make([]time.Duration, 0, len(reqs))
	for _, r := range reqs {
		t := time.Now()
		_, _ = x.Select(r, selector.Env{})
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	res.P50, res.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	up := make([]time.Duration, 0, updates)
	for i := range updates {
		s := *skills[(i*7919)%len(skills)]
		s.Digest = fmt.Sprintf("edit-%d", i)
		s.Description = fmt.Sprintf("%s Edited %d times.", s.Description, i)
		t := time.Now()
		x.Put(&s)
		up = append(up, time.Since(t))
	}
	slices.Sort(up)
	res.UpdateP50, res.UpdateMax = percentile(up, 0.50), up[len(up)-1]
	return res
}

// PrintRoute writes the routing figures.
func PrintRoute(w io.Writer, r RouteResult) {
	fmt.Fprintf(w, "routing a text request against %d skills (lexical recall, scoring, plan): p50 %s  p99 %s   (index built in %s)\n",
		r.Skills, r.P50.Round(100*time.Nanosecond), r.P99.Round(100*time.Nanosecond), r.Build.Round(time.Millisecond))
	fmt.Fprintf(w, "index update after one skill changes: p50 %s  max %s\n", r.UpdateP50.Round(time.Microsecond), r.UpdateMax.Round(time.Microsecond))
}
