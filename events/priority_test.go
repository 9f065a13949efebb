package events

import (
	"testing"
	"unsafe"
)

func TestLane(t *testing.T) {
	for p, want := range map[int]string{
		0: "default", 1: "default~p1", 60: "default~p1", 61: "default~p2", 600: "default~p2",
		-1: "default~p-1", -60: "default~p-1", -61: "default~p-2", -600: "default~p-2",
	} {
		if got := LanePool("default", Lane(p)); got != want {
			t.Errorf("priority %d: lane pool %s, want %s", p, got, want)
		}
		if err := CheckToken("pool", LanePool("default", Lane(p))); (err == nil) != (p == 0) {
			t.Errorf("priority %d: the lane's pool is a pool's name: %v", p, err)
		}
	}
}

// A plan keeps its skills in a map; a value over 128 bytes is stored apart, an
// allocation more per routed trigger.
func TestSkillRefFitsAMapSlot(t *testing.T) {
	if n := unsafe.Sizeof(SkillRef{}); n > 128 {
		t.Errorf("SkillRef is %d bytes; at most 128", n)
	}
}
