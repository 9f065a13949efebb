package events

import "testing"

func TestSeq(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Seq
		ok   bool
	}{
		{"412.1.3", Seq{412, 1, 3}, true},
		{"0.1.1", Seq{0, 1, 1}, true},
		{"1.0.1", Seq{}, false},
		{"1.1.0", Seq{}, false},
		{"1.1", Seq{}, false},
		{"1.1.1.1", Seq{}, false},
		{"1.1.x", Seq{}, false},
		{"1.01.1", Seq{}, false},
		{"1..1", Seq{}, false},
		{"-1.1.1", Seq{}, false},
		{"", Seq{}, false},
	} {
		got, err := ParseSeq(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSeq(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
	s := Seq{7, 1, 2}
	for _, tc := range []struct {
		next    Seq
		follows bool
	}{
		{Seq{7, 1, 3}, true},
		{Seq{7, 1, 4}, false},
		{Seq{7, 2, 1}, true},  // a redelivery
		{Seq{9, 1, 1}, true},  // the job published again
		{Seq{7, 2, 2}, false}, // the redelivery's first is missing
		{Seq{6, 1, 1}, false}, // an earlier job's
	} {
		if got := tc.next.Follows(s); got != tc.follows {
			t.Errorf("%v.Follows(%v) = %v, want %v", tc.next, s, got, tc.follows)
		}
	}
}

func FuzzParseSeq(f *testing.F) {
	for _, s := range []string{"412.1.3", "0.1.1", "1.0.1", "1..1", "18446744073709551615.1.1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s, err := ParseSeq(v)
		if err != nil {
			return
		}
		if s.String() != v {
			t.Fatalf("ParseSeq(%q) = %v, which writes %q", v, s, s.String())
		}
		if back, err := ParseSeq(s.String()); err != nil || back != s {
			t.Fatalf("%v does not read back: %v, %v", s, back, err)
		}
	})
}
