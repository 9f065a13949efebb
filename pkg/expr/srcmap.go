package expr

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// A srcMap maps byte offsets in rewritten source back to the source the user wrote,
// so that errors name the user's line and column, not the rewriter's.
type srcMap struct {
	segs []seg // sorted by out
}

// A seg says that out[out:out+n] came from src[src:src+n], or, if synth, was
// generated on behalf of the text at src.
type seg struct {
	out, src, n int
	synth       bool
}

// toSrc returns the source offset for rewritten offset off.
func (m *srcMap) toSrc(off int) int {
	if m == nil || len(m.segs) == 0 {
		return off
	}
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].out > off }) - 1
	if i < 0 {
		return m.segs[0].src
	}
	s := m.segs[i]
	if s.synth {
		return s.src
	}
	d := min(off-s.out, s.n)
	return s.src + d
}

// builder accumulates rewritten text and its srcMap.
type builder struct {
	buf  strings.Builder
	segs []seg
}

// copy appends src[from:to] unchanged.
func (b *builder) copy(src string, from, to int) {
	if to <= from {
		return
	}
	b.segs = append(b.segs, seg{out: b.buf.Len(), src: from, n: to - from})
	b.buf.WriteString(src[from:to])
}

// synth appends generated text attributed to source offset at.
func (b *builder) synth(text string, at int) {
	if text == "" {
		return
	}
	b.segs = append(b.segs, seg{out: b.buf.Len(), src: at, n: len(text), synth: true})
	b.buf.WriteString(text)
}

// sub appends text that was itself rewritten, with map m whose source offsets are
// relative to base.
func (b *builder) sub(text string, m *srcMap, base int) {
	start := b.buf.Len()
	b.buf.WriteString(text)
	if m == nil {
		b.segs = append(b.segs, seg{out: start, src: base, n: len(text)})
		return
	}
	for _, s := range m.segs {
		s.out += start
		s.src += base
		b.segs = append(b.segs, s)
	}
}

func (b *builder) result() (string, *srcMap) {
	return b.buf.String(), &srcMap{segs: b.segs}
}

// lineIndex converts between byte offsets and 1-based line:column (in runes, like
// go.starlark.net/syntax.Position).
type lineIndex struct {
	text   string
	starts []int
	ascii  []bool // whether each line is ASCII, so that columns are bytes
}

func newLineIndex(text string) *lineIndex {
	li := &lineIndex{text: text, starts: []int{0}, ascii: []bool{true}}
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\n':
			li.starts = append(li.starts, i+1)
			li.ascii = append(li.ascii, true)
		case c >= utf8.RuneSelf:
			li.ascii[len(li.ascii)-1] = false
		}
	}
	return li
}

// offset returns the byte offset of line:col, clamped to the text.
func (li *lineIndex) offset(line, col int) int {
	if line < 1 {
		return 0
	}
	if line > len(li.starts) {
		return len(li.text)
	}
	off := li.starts[line-1]
	if li.ascii[line-1] {
		end := len(li.text)
		if line < len(li.starts) {
			end = li.starts[line] - 1
		}
		return min(off+max(col-1, 0), end)
	}
	for c := 1; c < col && off < len(li.text) && li.text[off] != '\n'; c++ {
		_, size := utf8.DecodeRuneInString(li.text[off:])
		off += size
	}
	return off
}

// position returns the 1-based line and rune column of offset off.
func (li *lineIndex) position(off int) (line, col int) {
	off = max(0, min(off, len(li.text)))
	i := sort.Search(len(li.starts), func(i int) bool { return li.starts[i] > off }) - 1
	i = max(i, 0)
	return i + 1, utf8.RuneCountInString(li.text[li.starts[i]:off]) + 1
}

// lineText returns the text of 1-based line.
func (li *lineIndex) lineText(line int) string {
	if line < 1 || line > len(li.starts) {
		return ""
	}
	s := li.text[li.starts[line-1]:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, "\r")
}
