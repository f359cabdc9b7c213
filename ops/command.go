package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// The admin command language: one line, words separated by blanks, a
// word with blanks in "double quotes" (\" and \\ inside). The first word
// names a command of the process's Table; the rest are its arguments.
// `NAME ...` where NAME is a node the process hosts means `node NAME ...`
// (the seed's `NODE1 status`).

// Command is one admin command a process offers.
type Command struct {
	Name string // one word, lowercase
	Args string // argument synopsis for help: "[ID]", "ID@RAFT@ADMIN@PEER"
	Help string // one line
	// Mutates marks a command that changes the process or the cluster:
	// every call is logged with who asked.
	Mutates bool
	// Run does the command. Its result is a string (printed as it is on
	// the console) or a value that encodes to JSON; its error is the
	// answer when not nil.
	Run func(ctx context.Context, args []string) (any, error)
}

// Caller is who sent a command: for the log of mutating calls.
type Caller struct {
	Remote  string // remote address
	TokenID string // the token's id, "loopback" or "read-only"
	Via     string // "http" or "console"
	// Operator: the caller may run commands that change something
	// (loopback, or the operator token); else read-only (Auth.ReadToken).
	Operator bool
}

// Table is the commands of one process, with the built-in help and list.
// Safe from any goroutine: commands may be added while it serves.
type Table struct {
	mu    sync.Mutex
	cmds  map[string]Command
	nodes map[string]NodeControl
}

// NodeControl is a node hosted by the process, for `node NAME
// status|open|close` and the node's own actions (`node NAME ACTION`).
type NodeControl interface {
	// Status is the node's status (a NodeStatus, usually).
	Status() any
	// Open and Close start and stop the node taking part (the seed's
	// `NODE1 open`); ErrNotSupported when the node cannot.
	Open() error
	Close() error
	// Actions are the node's own commands (a node.AdminAction each).
	Actions() []Command
}

// NewTable returns a table with help and list.
func NewTable() *Table {
	t := &Table{cmds: map[string]Command{}, nodes: map[string]NodeControl{}}
	t.cmds["help"] = Command{Name: "help", Args: "[COMMAND]", Help: "the commands, or one command's synopsis", Run: t.help}
	t.cmds["list"] = Command{Name: "list", Help: "the nodes this process hosts (for node NAME ...)", Run: t.list}
	t.cmds["node"] = Command{Name: "node", Args: "NAME status|open|close|ACTION [ARGS]", Help: "a hosted node's status, open, close or own action", Run: t.node}
	return t
}

// Add adds c; a name taken already is ErrDuplicateCommand, a name that is
// not one lowercase word ErrBadCommand.
func (t *Table) Add(c Command) error {
	if c.Name == "" || strings.IndexFunc(c.Name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsUpper(r) || r == '"' }) >= 0 || c.Run == nil {
		return fmt.Errorf("%w: %q", ErrBadCommand, c.Name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.cmds[c.Name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateCommand, c.Name)
	}
	if _, ok := t.nodes[c.Name]; ok {
		return fmt.Errorf("%w: %q is a node's name", ErrDuplicateCommand, c.Name)
	}
	t.cmds[c.Name] = c
	return nil
}

// MustAdd adds each command, panicking on a clash: for the tables a
// process builds from constants at start-up.
func (t *Table) MustAdd(cs ...Command) {
	for _, c := range cs {
		if err := t.Add(c); err != nil {
			panic(err)
		}
	}
}

// AddNode makes n reachable as `node NAME ...` and `NAME ...`.
func (t *Table) AddNode(name string, n NodeControl) error {
	if name == "" || strings.ContainsFunc(name, unicode.IsSpace) {
		return fmt.Errorf("%w: node name %q", ErrBadCommand, name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.cmds[name]; ok {
		return fmt.Errorf("%w: node %q is a command's name", ErrDuplicateCommand, name)
	}
	if _, ok := t.nodes[name]; ok {
		return fmt.Errorf("%w: node %q", ErrDuplicateCommand, name)
	}
	t.nodes[name] = n
	return nil
}

// Commands are the table's commands, by name.
func (t *Table) Commands() []Command {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Command, 0, len(t.cmds))
	for _, c := range t.cmds {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Command) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup finds the command a parsed line names and the arguments it
// gets: words[0] a command, or a node's name (then `node` with the rest).
func (t *Table) Lookup(words []string) (Command, []string, error) {
	if len(words) == 0 {
		return Command{}, nil, fmt.Errorf("%w: empty line (try help)", ErrUnknownCommand)
	}
	t.mu.Lock()
	c, ok := t.cmds[words[0]]
	_, isNode := t.nodes[words[0]]
	nodeCmd := t.cmds["node"]
	t.mu.Unlock()
	switch {
	case ok:
		return c, words[1:], nil
	case isNode:
		return nodeCmd, words, nil
	}
	return Command{}, nil, fmt.Errorf("%w: %q (try help)", ErrUnknownCommand, words[0])
}

// Mutates says whether the command a line names changes anything (a
// node's open, close and own actions do).
func (t *Table) Mutates(c Command, args []string) bool {
	if c.Name == "node" {
		return len(args) >= 2 && args[1] != "status"
	}
	return c.Mutates
}

func (t *Table) help(_ context.Context, args []string) (any, error) {
	var b strings.Builder
	if len(args) == 1 {
		c, _, err := t.Lookup(args)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s %s\n  %s", c.Name, c.Args, c.Help)
		return b.String(), nil
	}
	if len(args) > 1 {
		return nil, fmt.Errorf("%w: help takes at most one COMMAND", ErrBadArgs)
	}
	for _, c := range t.Commands() {
		syn := strings.TrimSpace(c.Name + " " + c.Args)
		fmt.Fprintf(&b, "%-40s %s\n", syn, c.Help)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func (t *Table) list(_ context.Context, args []string) (any, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("%w: list takes no arguments", ErrBadArgs)
	}
	t.mu.Lock()
	names := make([]string, 0, len(t.nodes))
	for n := range t.nodes {
		names = append(names, n)
	}
	t.mu.Unlock()
	slices.Sort(names)
	return names, nil
}

func (t *Table) node(ctx context.Context, args []string) (any, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("%w: node NAME status|open|close|ACTION", ErrBadArgs)
	}
	t.mu.Lock()
	n, ok := t.nodes[args[0]]
	t.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: no node %q here (try list)", ErrUnknownCommand, args[0])
	}
	switch args[1] {
	case "status":
		return n.Status(), nil
	case "open":
		return okText(n.Open(), args[0]+" open")
	case "close":
		return okText(n.Close(), args[0]+" closed")
	}
	for _, a := range n.Actions() {
		if a.Name == args[1] {
			return a.Run(ctx, args[2:])
		}
	}
	return nil, fmt.Errorf("%w: node %s has no action %q (status, open, close or one of its own)", ErrUnknownCommand, args[0], args[1])
}

func okText(err error, msg string) (any, error) {
	if err != nil {
		return nil, err
	}
	return msg, nil
}

// ParseLine splits a command line into words.
func ParseLine(line string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		inQ   bool
		have  bool
	)
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case inQ && r == '\\' && i+1 < len(rs) && (rs[i+1] == '"' || rs[i+1] == '\\'):
			i++
			cur.WriteRune(rs[i])
		case r == '"':
			inQ, have = !inQ, true
		case !inQ && unicode.IsSpace(r):
			if have {
				words = append(words, cur.String())
				cur.Reset()
				have = false
			}
		case unicode.IsControl(r):
			return nil, fmt.Errorf("%w: control character %U", ErrSyntax, r)
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if inQ {
		return nil, fmt.Errorf("%w: unterminated quote", ErrSyntax)
	}
	if have {
		words = append(words, cur.String())
	}
	return words, nil
}
