package ops

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  error
	}{
		{"", nil, nil},
		{"  status  ", []string{"status"}, nil},
		{"node A1 status", []string{"node", "A1", "status"}, nil},
		{`say "hello world" x`, []string{"say", "hello world", "x"}, nil},
		{`q "a \"b\" \\ c"`, []string{"q", `a "b" \ c`}, nil},
		{`empty ""`, []string{"empty", ""}, nil},
		{"tab\tsep", []string{"tab", "sep"}, nil},
		{`open "quote`, nil, ErrSyntax},
		{"bell\a", nil, ErrSyntax},
	} {
		got, err := ParseLine(tc.in)
		if !errors.Is(err, tc.err) || (tc.err == nil && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("ParseLine(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// FuzzParseLine: a console line from the network never panics, and a
// line that parses re-parses from its quoted words into the same words.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"status", `a "b c" d`, `"\"`, "\xff\xfb\x01help", "node X act 1 2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ws, err := ParseLine(s)
		if err != nil {
			return
		}
		var q []string
		for _, w := range ws {
			q = append(q, `"`+strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w)+`"`)
		}
		again, err := ParseLine(strings.Join(q, " "))
		if err != nil || !reflect.DeepEqual(again, ws) && len(ws) > 0 {
			t.Fatalf("%q -> %q -> %q, %v", s, ws, again, err)
		}
	})
}

type testNode struct{ opened int }

func (n *testNode) Status() any  { return NodeStatus{Account: "A1"} }
func (n *testNode) Open() error  { n.opened++; return nil }
func (n *testNode) Close() error { return ErrNotSupported }
func (n *testNode) Actions() []Command {
	return []Command{{Name: "ping", Run: func(_ context.Context, args []string) (any, error) {
		return "pong " + strings.Join(args, ","), nil
	}}}
}

// TestTable_LookupNodesAndHelp: commands by name, `NAME ...` as `node
// NAME ...`, a node's actions, clashes refused, help listing each.
func TestTable_LookupNodesAndHelp(t *testing.T) {
	tb := NewTable()
	tb.MustAdd(Command{Name: "members", Help: "the members", Run: func(context.Context, []string) (any, error) { return "m", nil }})
	n := &testNode{}
	if err := tb.AddNode("A1", n); err != nil {
		t.Fatal(err)
	}
	if err := tb.AddNode("gw", &testNode{}); err != nil {
		t.Fatal(err)
	}
	if err := tb.AddNode("members", &testNode{}); !errors.Is(err, ErrDuplicateCommand) {
		t.Errorf("a node named like a command: %v", err)
	}
	for _, bad := range []Command{{Name: "members", Run: func(context.Context, []string) (any, error) { return nil, nil }}, {Name: "gw", Run: func(context.Context, []string) (any, error) { return nil, nil }}} {
		if err := tb.Add(bad); !errors.Is(err, ErrDuplicateCommand) {
			t.Errorf("Add(%q): %v, want ErrDuplicateCommand", bad.Name, err)
		}
	}
	if err := tb.Add(Command{Name: "Two Words", Run: func(context.Context, []string) (any, error) { return nil, nil }}); !errors.Is(err, ErrBadCommand) {
		t.Errorf("a bad name: %v", err)
	}
	run := func(line string) (any, error) {
		ws, err := ParseLine(line)
		if err != nil {
			return nil, err
		}
		c, args, err := tb.Lookup(ws)
		if err != nil {
			return nil, err
		}
		return c.Run(context.Background(), args)
	}
	for line, want := range map[string]string{"members": "m", "node A1 ping x y": "pong x,y", "A1 ping": "pong ", "A1 open": "A1 open"} {
		if got, err := run(line); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %q", line, got, err, want)
		}
	}
	if n.opened != 1 {
		t.Errorf("opened %d times", n.opened)
	}
	if _, err := run("A1 close"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("close: %v", err)
	}
	if _, err := run("nope"); !errors.Is(err, ErrUnknownCommand) {
		t.Errorf("nope: %v", err)
	}
	if _, err := run("node B9 status"); !errors.Is(err, ErrUnknownCommand) {
		t.Errorf("unknown node: %v", err)
	}
	h, err := run("help")
	if err != nil || !strings.Contains(h.(string), "members") || !strings.Contains(h.(string), "node NAME") {
		t.Errorf("help: %v, %v", h, err)
	}
	if l, err := run("list"); err != nil || !reflect.DeepEqual(l, []string{"A1", "gw"}) {
		t.Errorf("list: %v, %v", l, err)
	}
	c, args, _ := tb.Lookup([]string{"A1", "status"})
	if tb.Mutates(c, args) {
		t.Error("node status counted as mutating")
	}
	c, args, _ = tb.Lookup([]string{"A1", "ping"})
	if !tb.Mutates(c, args) {
		t.Error("a node action not counted as mutating")
	}
}
