package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// What an operator meets first: --version, shell completion, an example
// in every --help, "did you mean" for a typo'd subcommand.

// commit is the VCS commit when the build info has none (a build with
// -buildvcs=false, or from a git worktree, which Go does not stamp):
// make build sets it with -ldflags "-X main.commit=...".
var commit string

// version is the module version and VCS commit of this binary, from the
// build info Go records ("(devel)" for a build in the source tree;
// "+dirty" when the tree had changes).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build info)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		rev = commit
	}
	if rev == "" {
		return v + " " + bi.GoVersion + " (no commit recorded: build with make build)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	if at != "" {
		rev += " (" + at + ")"
	}
	return fmt.Sprintf("%s commit %s %s", v, rev, bi.GoVersion)
}

// examples are the Examples section of each subcommand's --help, by
// its path ("admin status").
var examples = map[string]string{
	"sequencer": `seqd sequencer --udp.interface eth0                      # one sequencer, alone
P=1@10.0.0.1:7301@127.0.0.1:7401@10.0.0.1:7501,2@10.0.0.2:7301@127.0.0.1:7401@10.0.0.2:7501,3@10.0.0.3:7301@127.0.0.1:7401@10.0.0.3:7501
seqd sequencer --cluster --id 1 --dir /var/lib/seqd --peers $P   # member 1 of a group of three
seqd sequencer --config /etc/seqd/seqd.toml --cluster --id 2 --dir /var/lib/seqd --peers $P --dry-run`,
	"replayer": `seqd replayer --dir /var/lib/seqd/replayer --nak-addr 10.0.0.4:9300 --rewind-addr 10.0.0.4:9400
seqd replayer --dir /var/lib/seqd/tier2 --tier 2 --upstream 10.0.0.4:9400 --rewind-addr 10.0.0.5:9400`,
	"node": `seqd node --account A --count 100000                      # send, verify, exit 0 when all are acked
seqd node --read-only --expect 1000 --replayer 10.0.0.4:9300 --rewind 10.0.0.4:9400`,
	"tail": `seqd tail                                                  # the live stream, as text
seqd tail --from 1 --rewind 10.0.0.4:9400 --format json | jq .
seqd tail --archive /var/lib/seqd/replayer --follow`,
	"replay": `seqd replay /var/lib/seqd/replayer                         # a session archive, offline
seqd replay --from 1000 --to 2000 --format json 10.0.0.4:9400 # from a remote replayer`,
	"keygen": `seqd keygen --out /etc/seqd/stream.keys                         # stream key id 1
seqd keygen --class command:alice --id 10 --out /etc/seqd/command.keys
seqd keygen --class stream --id 2 --append --out /etc/seqd/stream.keys # a rotation: signers use key 2, key 1 still verifies`,
	"bench": `seqd bench --transport udp --mode tput --size 256 --nodes 3
seqd bench --transport tcp --mode rtt --count 100000`,
	"demo": `seqd demo                  # a group of three, a replayer and three nodes, a failover
seqd demo --sequencers 1   # one sequencer over a lossy in-memory network`,
	"config print-defaults": `seqd config print-defaults > /etc/seqd/seqd.toml   # every key of every subcommand
seqd config print-defaults sequencer              # the keys of seqd sequencer only`,
	"admin status":           `seqd admin status --addr 127.0.0.1:7401`,
	"admin transfer-primary": `seqd admin transfer-primary --addr 127.0.0.1:7401 3`,
	"admin add-member":       `seqd admin add-member --addr 127.0.0.1:7401 4@10.0.0.4:7301@127.0.0.1:7401@10.0.0.4:7501`,
	"admin remove-member":    `seqd admin remove-member --addr 127.0.0.1:7401 4`,
	"drill failover":         `seqd drill failover --rounds 10 --rate 2000`,
	"drill bridge": `seqd drill bridge --rounds 10
seqd drill bridge --rounds 6 --sequencers 3 --faults loss=0.05,seed=9`,
	"bridge": `seqd bridge --role send --site A --tcp 10.0.0.9:31300 --udp 10.1.0.9:31301 --dir /var/lib/seqd/bridge-a
seqd bridge --role receive --site B --tcp 10.0.0.9:31300 --udp 10.1.0.9:31301 --dir /var/lib/seqd/bridge-b --rewind-addr 10.1.0.9:9400`,
	"admin wait-ready":    `seqd admin wait-ready --addr 127.0.0.1:7401 --timeout 60s`,
	"admin activate":      `seqd admin activate --addr 127.0.0.1:7401 SHOP 2      # instance 2 of account SHOP becomes active`,
	"admin force-passive": `seqd admin force-passive --addr 127.0.0.1:7401 SHOP 1 # its live partner takes over`,
	"drill hothot": `seqd drill hothot --rounds 20
seqd drill hothot --rounds 5 --active-timeout 100ms --keep`,
	"admin exec": `seqd admin exec --addr 127.0.0.1:7401 members`,
	"logger": `seqd logger --dir /var/log/seqd --format json --daily --keep 30
seqd logger --dir /var/log/seqd --from 1 --rewind 10.0.0.4:9400`,
	"archiver":   `seqd archiver --from /var/lib/seqd/replayer --to /srv/archive --settle 5m`,
	"admin-node": `seqd admin-node --gossip 10.0.0.1 --http-addr 127.0.0.1:7400`,
	"completion": `seqd completion bash > /etc/bash_completion.d/seqd
echo 'source <(seqd completion zsh)' >> ~/.zshrc`,
}

// addExamples gives every subcommand (not its own yet) a usage line and
// its examples; walk recurses into subcommands.
func addExamples(cmds []*cli.Command, path string) {
	for _, cmd := range cmds {
		p := strings.TrimSpace(path + " " + cmd.Name)
		if ex, ok := examples[p]; ok && cmd.UsageText == "" {
			usage := "seqd " + p
			if len(cmd.Subcommands) > 0 {
				usage += " command"
			}
			if len(cmd.Flags) > 0 {
				usage += " [options]"
			}
			if cmd.ArgsUsage != "" && strings.TrimSpace(cmd.ArgsUsage) != "" {
				usage += " " + cmd.ArgsUsage
			}
			cmd.UsageText = usage + "\n\nExamples:\n" + indent(ex)
		}
		addExamples(cmd.Subcommands, p)
	}
}

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// notACommand answers `seqd sequencr` (urfave/cli says "No help topic"):
// the nearest subcommand's name, and exit status 1.
func notACommand(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.ShowAppHelp(c)
	}
	name := c.Args().First()
	var names []*cli.Command
	for _, cmd := range c.App.Commands {
		if !cmd.Hidden {
			names = append(names, cmd)
		}
	}
	if s := nearest(names, name); s != "" {
		return fmt.Errorf("%q is not a seqd subcommand; did you mean %q? (seqd --help lists them)", name, s)
	}
	return fmt.Errorf("%q is not a seqd subcommand (seqd --help lists them)", name)
}

// nearest is the subcommand name (or alias) closest to name by edit
// distance, if it is close enough to be a typo (at most a third of its
// letters, two at least, or name is its prefix); "" if none is.
func nearest(cmds []*cli.Command, name string) string {
	best, bestD := "", 0
	for _, cmd := range cmds {
		for _, n := range cmd.Names() {
			d := editDistance(name, n)
			if strings.HasPrefix(n, name) && len(name) >= 2 {
				d = 1
			}
			if best == "" || d < bestD {
				best, bestD = n, d
			}
		}
	}
	if best == "" || bestD > max(2, len(best)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// completionCommand prints the shell completion script: bash or zsh.
// The scripts ask seqd itself (urfave/cli's --generate-bash-completion)
// for the subcommands and flags of the words typed so far.
func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script (bash or zsh) for seqd's subcommands and flags",
		ArgsUsage: "bash|zsh",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("completion: name the shell: seqd completion bash, or seqd completion zsh")
			}
			switch c.Args().First() {
			case "bash":
				_, err := fmt.Fprint(os.Stdout, bashCompletion)
				return err
			case "zsh":
				_, err := fmt.Fprint(os.Stdout, zshCompletion)
				return err
			}
			return fmt.Errorf("completion: %q: want bash or zsh", c.Args().First())
		},
	}
}

const bashCompletion = `# bash completion for seqd: source it, or put it in /etc/bash_completion.d/seqd
_seqd() {
    local cur="${COMP_WORDS[COMP_CWORD]}" words
    if [[ "$cur" == -* ]]; then
        # "--" would end the flags: "-" asks for them all.
        words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:COMP_CWORD-1}" "${cur/#--/-}" --generate-bash-completion 2>/dev/null)
    else
        words=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:COMP_CWORD-1}" --generate-bash-completion 2>/dev/null)
    fi
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o bashdefault -o default -F _seqd seqd
`

const zshCompletion = `#compdef seqd
# zsh completion for seqd: source <(seqd completion zsh), or save it as _seqd in $fpath
_seqd() {
    local -a opts
    local cur=${words[CURRENT]}
    if [[ "$cur" == -* ]]; then
        opts=("${(@f)$(${words[1]} ${words[2,CURRENT-1]} - --generate-bash-completion 2>/dev/null)}")
    else
        opts=("${(@f)$(${words[1]} ${words[2,CURRENT-1]} --generate-bash-completion 2>/dev/null)}")
    fi
    _describe 'seqd' opts
}
compdef _seqd seqd
`
