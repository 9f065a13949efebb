package natstest

import (
	"flag"
	"strconv"
)

// WaitingTests lets n of a package's parallel tests run at once, rather than
// one per core, unless -parallel was given: for packages whose tests mostly
// wait — on AckWaits, throttle periods, servers restarting, programs starting —
// and use little CPU while they do. With two cores, go test runs two at a time,
// and a test waiting out a 20-second throttle period holds one of the two places
// all along. Call it from TestMain, before m.Run.
func WaitingTests(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic("natstest: " + err.Error())
		}
	}
}
