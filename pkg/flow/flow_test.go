package flow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func event(t testing.TB, data string) *Event {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatal(err)
	}
	ext := map[string]string{"tenant": "acme", "partitionkey": "p1"}
	return &Event{ID: "1", Type: "com.example.order", Source: "/shop", Subject: "orders/9", Time: "2026-03-01T10:00:00Z",
		Data: v, Ext: func(n string) string { return ext[n] }}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	ev := event(t, `{"amount": 250, "customer": {"tier": "gold"}, "items": [1, 2, 3], "tags": ["rush"]}`)
	for _, tc := range []struct {
		expr string
		want bool
		err  string
	}{
		{expr: `data.amount > 100`, want: true},
		{expr: `data.amount > 100.5 && data.customer.tier == "gold"`, want: true},
		{expr: `data.amount == 250`, want: true},
		{expr: `type == "com.example.order" && source.startsWith("/shop")`, want: true},
		{expr: `subject.endsWith("/9") && id == "1" && time > "2026"`, want: true},
		{expr: `extensions.tenant == "acme" && extensions.partitionkey != ""`, want: true},
		{expr: `extensions["tenant"] == "other"`, want: false},
		{expr: `extensions.missing == ""`, want: true},
		{expr: `size(data.items) == 3 && "rush" in data.tags`, want: true},
		{expr: `data.items.all(x, x < 3)`, want: false},
		{expr: `has(data.coupon) && data.coupon == "x"`, want: false},
		{expr: `data.coupon == "x"`, err: "no such key: coupon"},
		{expr: `data.amount.size() > 1`, err: "no such overload"},
		// A string compared with a number says how to convert.
		{expr: `data.customer.tier > 100`, err: "no such overload: values of types the operator does not take together (a string where a number was meant? int(), double() and string() convert)"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			p, err := Compile(tc.expr, Filter)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Match(ev)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Match = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Match = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		kind Kind
		want string // "line:col: message" prefix
	}{
		{"", Filter, "1:1: the expression is empty"},
		{"data.amount >", Filter, "1:14: Syntax error"},
		{"data.amount > 1 &&\n  nosuch == 2", Filter, "2:3: undeclared reference to 'nosuch'"},
		{`type + "x"`, Filter, "1:1: a filter must be true or false; this is string"},
		{`[1, 2]`, Key, "1:1: a key must be a string, a number or a bool"},
		{`size(extensions) > 0`, Filter, "1:6: extensions are read by name"},
		{`extensions[type] == "x"`, Filter, "1:1: extensions are read by name"},
		{`type == "x" && extensions.Tenant == "a"`, Filter, `1:16: extension "Tenant": a CloudEvents extension name is lowercase letters and digits: extensions.tenant`},
		{`extensions["my-region"] == "a"`, Filter, `1:1: extension "my-region": a CloudEvents extension name is lowercase letters and digits`},
		{strings.Repeat("1 + ", 2000) + "1 > 0", Filter, "1:1: the expression is 8005 bytes"},
	} {
		_, err := Compile(tc.expr, tc.kind)
		var fe *Error
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Error(), tc.want) {
			t.Errorf("Compile(%.40q) = %v, want an *Error starting %q", tc.expr, err, tc.want)
		}
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	ev := event(t, `{"customer": "c-7", "n": 3, "x": 1.5, "ok": true}`)
	for expr, want := range map[string]string{
		`data.customer`:       "c-7",
		`data.n`:              "3",
		`data.x`:              "1.5",
		`data.ok`:             "true",
		`int(data.n) + 1`:     "4",
		`source + "/" + type`: "/shop/com.example.order",
		`extensions.tenant`:   "acme",
	} {
		p, err := Compile(expr, Key)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p.KeyOf(ev); err != nil || got != want {
			t.Errorf("KeyOf(%s) = %q, %v; want %q", expr, got, err, want)
		}
	}
	p, _ := Compile(`data.list`, Key)
	if _, err := p.KeyOf(event(t, `{"list": [1]}`)); err == nil {
		t.Error("a list key was accepted")
	}
}

// A hostile expression stops at the cost limit, quickly, whatever it asks for.
func TestReads(t *testing.T) {
	t.Parallel()
	p, err := Compile("data.a + subject +\n  extensions[\"tenant\"] + data.items.map(x, x.id)[0] + extensions.region", Key)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Reads() {
		got = append(got, fmt.Sprintf("%d:%d %s", r.Line, r.Column, r))
	}
	want := []string{"1:1 data.a", "1:10 subject", "2:3 extensions.tenant", "2:26 data.items", "2:55 extensions.region"}
	if !slices.Equal(got, want) {
		t.Errorf("reads %q, want %q", got, want)
	}
	p, err = Compile(`has(data.shop) ? data["shop"] : string(data)`, Key)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, r := range p.Reads() {
		got = append(got, r.String())
	}
	if want := []string{"data", "data.shop", "data"}; !slices.Equal(got, want) {
		t.Errorf("reads %q, want %q", got, want)
	}
}

func TestCostLimitStopsHostileExpressions(t *testing.T) {
	t.Parallel()
	ev := event(t, `{"items": [`+strings.TrimSuffix(strings.Repeat("1,", 2000), ",")+`]}`)
	for _, expr := range []string{
		`data.items.all(x, data.items.all(y, data.items.all(z, x + y + z > 0)))`,
		`[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, a+b+c+d+e))))).size() > 0`,
	} {
		p, err := Compile(expr, Filter)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = p.Match(ev)
		if !errors.Is(err, ErrCost) {
			t.Fatalf("Match = %v, want ErrCost", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("stopping took %v", d)
		}
	}
}

// FuzzFilter: any expression either fails to compile with a position inside it,
// or evaluates over any data to a verdict or an error, without panicking.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{
		`data.amount > 100`, `type == "x"`, `extensions.tenant == "a"`, `has(data.a.b)`, `data.items.exists(x, x == 1)`,
		`data.s.matches("^a+$")`, `[1,2].map(x, x*2)[5] == 1`, `1/0 == 1`, `"\xff" == data`, `data["k"] in [1, "a"]`,
		`size(extensions) > 0`, `a.b.c(`, `)(`, `data.amount > 100 ?`, "\x00", `int(data) > 2`,
	} {
		f.Add(s, `{"amount": 250, "a": {"b": 1}, "items": [1, 2], "s": "aaa", "k": 1}`)
	}
	f.Fuzz(func(t *testing.T, expr, data string) {
		p, err := Compile(expr, Filter)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || fe.Line < 1 || fe.Column < 1 || fe.Line > strings.Count(expr, "\n")+1 {
				t.Fatalf("Compile(%q) = %v, want an *Error inside the expression", expr, err)
			}
			return
		}
		var v any
		if json.Unmarshal([]byte(data), &v) != nil {
			v = data
		}
		_, _ = p.Match(&Event{Type: "t", Data: v, Ext: func(string) string { return "x" }})
	})
}

func BenchmarkMatch(b *testing.B) {
	ev := event(b, `{"amount": 250, "customer": {"tier": "gold"}, "name": "Ada"}`)
	p, err := Compile(`data.amount > 100 && data.customer.tier == "gold"`, Filter)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := p.Match(ev); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func TestMatchPair(t *testing.T) {
	t.Parallel()
	p, err := CompileMatch("event.data.order_id == trigger.data.order_id && event.source == trigger.source")
	if err != nil {
		t.Fatal(err)
	}
	order := func(id float64) *Event {
		return &Event{Source: "/shop", Type: "t", Data: map[string]any{"order_id": id}}
	}
	if ok, err := p.MatchPair(order(7), order(7)); !ok || err != nil {
		t.Fatalf("same order: %v, %v; want true", ok, err)
	}
	if ok, err := p.MatchPair(order(7), order(8)); ok || err != nil {
		t.Fatalf("another order: %v, %v; want false", ok, err)
	}
	if ok, _ := p.MatchPair(&Event{Data: map[string]any{}}, order(7)); ok {
		t.Fatal("a field the event lacks: a match")
	}
	for src, want := range map[string]string{
		"event.data.x ==":     "1:16: Syntax error",
		"data.x == 1":         "undeclared reference to 'data'",
		"event.data.order_id": "",
		"trigger.id":          "",
	} {
		_, err := CompileMatch(src)
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", src, err, want)
		}
	}
}
