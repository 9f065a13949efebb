package bus

import "testing"

func TestBufPoolClasses(t *testing.T) {
	for _, n := range []int{0, 1, 2 << 10, 2<<10 + 1, 5000, 16 << 10, 32 << 10, 32<<10 + 1, 100 << 10} {
		b := getBuf(n)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("getBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		if n > pooledMax && cap(b) != n {
			t.Fatalf("getBuf(%d) beyond the pool: cap %d, want exactly %d", n, cap(b), n)
		}
		putBuf(append(b, 'x'))
	}
	putBuf(make([]byte, 10, 3000)) // no class: dropped
}
