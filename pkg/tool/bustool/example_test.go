package bustool_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

func Example() {
	nc, stop := exampleNATS()
	defer stop()
	ctx := context.Background()

	// One process serves a tool...
	shout := tool.Func("shout", func(ctx context.Context, c tool.Call) (any, error) {
		text, err := tool.NewArgs("shout", c.Args).String("text")
		if err != nil {
			return nil, err
		}
		return strings.ToUpper(text) + "!", nil
	})
	srv, err := bustool.Serve(nc, bustool.ServerConfig{Name: "loud"}, bustool.Def{
		Tool:        shout,
		Description: "Shouts the text.",
		Schema:      map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
	})
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown(ctx)

	// ...and any other finds and calls it.
	tools, err := bustool.Discover(ctx, nc, bustool.Config{})
	if err != nil {
		panic(err)
	}
	for _, t := range tools {
		fmt.Printf("%s on %s: %s\n", t.Name(), t.Subject(), t.Description())
	}
	res, err := tools[0].Call(ctx, tool.Call{Args: map[string]any{"text": "hello"}})
	fmt.Println(res, err)
	_, err = tools[0].Call(ctx, tool.Call{})
	fmt.Println(err)
	// Output:
	// shout on skillbus.tool.shout: Shouts the text.
	// HELLO! <nil>
	// bustool: shout: argument "text" is required
}

// exampleNATS starts a NATS server in the process and connects to it.
func exampleNATS() (*nats.Conn, func()) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		panic("nats-server did not start")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		panic(err)
	}
	return nc, func() {
		nc.Close()
		s.Shutdown()
		s.WaitForShutdown()
	}
}
