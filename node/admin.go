package node

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// AdminAction is a command a node's program adds to its process's admin
// surface (the seed's addAdminAction): an operator runs it as `node
// ACCOUNT NAME ARGS...` (or `ACCOUNT NAME ARGS...`) on the console or
// through `seqd admin exec`, and gets Run's text back. Run is called on an
// admin goroutine, never the node's loop: it may Send, and must guard
// state it shares with the Handler.
type AdminAction struct {
	Name string // one lowercase word; status, open and close are taken
	Args string // argument synopsis for help
	Help string // one line
	Run  func(args []string) (string, error)
}

// ErrAdminAction: an AdminAction with no name, a taken name or no Run.
var ErrAdminAction = errors.New("node: bad admin action")

// adminActions are a Node's AdminActions, safe from any goroutine.
type adminActions struct {
	mu sync.Mutex
	as []AdminAction
}

var reservedActions = []string{"status", "open", "close"}

// AddAdminAction adds a to the node's admin commands.
func (n *Node) AddAdminAction(a AdminAction) error {
	if a.Name == "" || a.Run == nil || slices.Contains(reservedActions, a.Name) {
		return fmt.Errorf("%w: %q (a name other than status, open, close, and a Run)", ErrAdminAction, a.Name)
	}
	n.admin.mu.Lock()
	defer n.admin.mu.Unlock()
	for _, o := range n.admin.as {
		if o.Name == a.Name {
			return fmt.Errorf("%w: %q added twice", ErrAdminAction, a.Name)
		}
	}
	n.admin.as = append(n.admin.as, a)
	return nil
}

// AdminActions are the actions added, in the order added.
func (n *Node) AdminActions() []AdminAction {
	n.admin.mu.Lock()
	defer n.admin.mu.Unlock()
	return slices.Clone(n.admin.as)
}
