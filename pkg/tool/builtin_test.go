package tool_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/tooltest"
)

func TestEchoConformance(t *testing.T) {
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		return tooltest.Fixture{
			Tool: tool.Echo(),
			OK: tool.Call{Args: map[string]any{
				"s": "hé", "i": int64(-3), "f": 2.5, "b": true, "n": nil,
				"l": []any{int64(1), "x"}, "m": map[string]any{"k": []any{}},
			}},
			CheckOK: func(t *testing.T, res any) {
				want := map[string]any{
					"s": "hé", "i": int64(-3), "f": 2.5, "b": true, "n": nil,
					"l": []any{int64(1), "x"}, "m": map[string]any{"k": []any{}},
				}
				if diff := cmp.Diff(want, res); diff != "" {
					t.Errorf("echo result (-want +got):\n%s", diff)
				}
			},
			BadArg: &tool.Call{Args: map[string]any{"c": make(chan int)}},
		}
	})
}

func TestNoopConformance(t *testing.T) {
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		return tooltest.Fixture{
			Tool: tool.Noop(),
			OK:   tool.Call{Args: map[string]any{"anything": []any{"goes"}}},
			CheckOK: func(t *testing.T, res any) {
				if res != nil {
					t.Errorf("noop returned %v, want nil", res)
				}
			},
		}
	})
}

func TestFuncConformance(t *testing.T) {
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		return tooltest.Fixture{
			Tool: tool.Func("upper", func(ctx context.Context, c tool.Call) (any, error) {
				if err := ctx.Err(); err != nil {
					return nil, failureWrapCtx(err)
				}
				s, err := tool.NewArgs("upper", c.Args).String("s")
				if err != nil {
					return nil, err
				}
				return map[string]any{"s": s + "!"}, nil
			}),
			OK:     tool.Call{Args: map[string]any{"s": "hi"}},
			BadArg: &tool.Call{Args: map[string]any{}},
		}
	})
}

func TestEchoReturnsACopy(t *testing.T) {
	args := map[string]any{"a": "b"}
	res, err := tool.Echo().Call(t.Context(), tool.Call{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	res.(map[string]any)["a"] = "changed"
	if args["a"] != "b" {
		t.Error("changing echo's result changed the call's arguments")
	}
}

func ExampleEcho() {
	res, err := tool.Echo().Call(context.Background(), tool.Call{
		Args: map[string]any{"greeting": "hello", "n": int64(2)},
	})
	fmt.Println(res, err)
	// Output: map[greeting:hello n:2] <nil>
}

func ExampleNewSet() {
	shout := tool.Func("shout", func(ctx context.Context, c tool.Call) (any, error) {
		s, err := tool.NewArgs("shout", c.Args).String("text")
		if err != nil {
			return nil, err
		}
		return s + "!", nil
	})
	set, err := tool.NewSet(shout, tool.Echo(), tool.Noop())
	if err != nil {
		panic(err)
	}
	fmt.Println(set.Names())

	t, _ := set.Lookup("shout")
	res, err := t.Call(context.Background(), tool.Call{Args: map[string]any{"text": "hey"}})
	fmt.Println(res, err)
	_, err = t.Call(context.Background(), tool.Call{})
	fmt.Println(err)
	// Output:
	// [echo noop shout]
	// hey! <nil>
	// shout: argument "text" is required
}
