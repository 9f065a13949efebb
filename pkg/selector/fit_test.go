package selector_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Fit keeps the setting that routes the cases best: here only a threshold below the
// default lets the weakly matched request through.
func TestFit(t *testing.T) {
	t.Parallel()
	skills := []*skill.Skill{pdf, notes, weather, news}
	cases := []selector.Case{
		{Query: "pdf", Expect: "pdf-summarizer"},
		{Query: "I would love something that handles my pdf files from the office tomorrow morning early", Expect: "pdf-summarizer"},
		{Query: "what is the capital of peru"},
	}
	g := selector.FitGrid{Name: []float32{3}, Description: []float32{1}, K1: []float64{1.2}, B: []float64{0.75}, Threshold: []float64{0.65, 0.45}}
	f := selector.Fit(skills, cases, selector.Config{}, g)
	if f.Threshold != 0.45 || f.Top1 != 1 {
		t.Fatalf("fitted %s", f)
	}
	var b bytes.Buffer
	if err := f.WriteYAML(&b); err != nil {
		t.Fatal(err)
	}
	back, err := selector.ReadFitted(&b, "w.yaml")
	if err != nil || back.String() != f.String() || back.Bigram == nil || *back.Bigram != selector.DefaultWeights.Bigram {
		t.Fatalf("read back %s, %v; wrote %s", back, err, f)
	}
	if c := back.Apply(selector.Config{}); c.Threshold != 0.45 || c.Index.Name != 3 || c.Index.Tags != selector.DefaultWeights.Tags || c.Index.Bigram != 0.5 {
		t.Fatalf("applied %+v", c)
	}
	// A file without bigram (as written before word pairs were fitted) keeps the
	// default; bigram: 0 turns pairs off.
	for in, want := range map[string]float32{"": 0.5, "bigram: 0\n": 0} {
		got, err := selector.ReadFitted(strings.NewReader("name: 3\ndescription: 1\nk1: 1.2\nb: 0.75\nthreshold: 0.65\n"+in), "w.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if c := got.Apply(selector.Config{}); c.Index.Bigram != want {
			t.Errorf("%q: bigram %v, want %v", in, c.Index.Bigram, want)
		}
	}
}

func TestReadFittedErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"name: 3\ndescription: 1\nk1: 1.2\nb: 0.75\nthreshold: 0.7\ncolour: red\n": "w.yaml: yaml: unmarshal errors",
		"name: 0\ndescription: 1\nk1: 1.2\nb: 0.75\nthreshold: 0.7\n":              "name and description weights must be positive",
		"name: 3\ndescription: 1\nk1: 1.2\nb: 2\nthreshold: 0.7\n":                 "k1 must be positive and b in [0, 1]",
		"name: 3\ndescription: 1\nk1: 1.2\nb: 0.5\nthreshold: 0\n":                 "threshold must be in (0, 1]",
		"name: 3\ndescription: 1\nk1: 1.2\nb: 0.5\nthreshold: 0.6\nbigram: -1\n":   "bigram must be 0 or more",
		"name: 3\ndescription: 1\nk1: 1.2\nb: 0.5\nthreshold: 0.6\nfeedback: -1\n": "feedback must be in [0, 10]",
		"[": "w.yaml:",
	} {
		if _, err := selector.ReadFitted(strings.NewReader(in), "w.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

func FuzzReadFitted(f *testing.F) {
	f.Add("name: 3\ndescription: 1\nk1: 1.2\nb: 0.75\nthreshold: 0.65\n")
	f.Add("name: 5\n")
	f.Add("name: 3\ndescription: 1\nk1: 1.2\nb: 0.75\nthreshold: 0.65\nbigram: 0.5\n")
	f.Add("name: 3\ndescription: 1\nk1: 1.2\nb: 0.75\nthreshold: .nan\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := selector.ReadFitted(strings.NewReader(in), "f")
		if err != nil {
			return
		}
		if !(got.Name > 0 && got.Description > 0 && got.K1 > 0 && got.B >= 0 && got.B <= 1 && got.Threshold > 0 && got.Threshold <= 1) ||
			got.Bigram != nil && !(*got.Bigram >= 0) {
			t.Fatalf("accepted %+v", got)
		}
	})
}
