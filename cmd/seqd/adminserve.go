package main

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/options"
)

// adminServeFlags are the keys of a process's admin surface: --admin-addr
// (HTTP: status, commands, /metrics, /healthz, /readyz; withAddr: a
// cluster member declares its own in clusterFlags), --console-addr (the
// line console) and --admin-token.
func adminServeFlags(withAddr bool) []cli.Flag {
	fs := []cli.Flag{
		options.String("console-addr", "", "host:port of the admin console (telnet or nc: the admin command language, one command a line; empty: none)"),
		options.String("admin-token", "", "token callers off loopback must present (HTTP: Authorization: Bearer TOKEN; console: auth TOKEN); needed to listen off loopback"),
		options.String("security.admin-read-token", "", "a read-only admin token: callers off loopback presenting it get status, lists and metrics, and every command that changes something is refused (403); --admin-token is the operator's"),
		options.Bool("security.admin-tls", true, "with the security.tls-* keys: the admin HTTP endpoint, /metrics, the status page and the console speak only TLS 1.3, and the caller's certificate gives its role (admin-* and member-*: operator; any other of the CA: read-only; none: only /healthz and /readyz, or a token); false: they stay plain (then loopback or a token)"),
	}
	if withAddr {
		fs = append([]cli.Flag{options.String("admin-addr", "", "host:port of the admin endpoint (HTTP: /v1/status, /v1/cmd, /metrics, /healthz, /readyz; empty: none; keep it on loopback or set --admin-token)")}, fs...)
	}
	return fs
}

// adminAuth is the --admin-token of c, with the process's logger, and its
// TLS identity unless --security.admin-tls=false (a file that does not
// load is reported where the process loads its transports' TLS).
func adminAuth(c *cli.Context, log *slog.Logger) ops.Auth {
	a := ops.Auth{Token: c.String("admin-token"), ReadToken: c.String("security.admin-read-token"), Logger: log}
	if c.Bool("security.admin-tls") {
		a.TLS, _ = tlsIdentity(c)
	}
	return a
}

// serveAdmin serves s on --admin-addr and --console-addr (when given)
// until ctx of c ends; close the Server it returns when done (nil when
// neither address is given).
func serveAdmin(c *cli.Context, s *ops.Surface, log *slog.Logger) (*ops.Server, error) {
	httpAddr, conAddr := c.String("admin-addr"), c.String("console-addr")
	if httpAddr == "" && conAddr == "" {
		return nil, nil
	}
	sv, err := ops.Serve(c.Context, s, adminAuth(c, log), "admin-addr", httpAddr, "console-addr", conAddr)
	if err != nil {
		return nil, err
	}
	log.Info("admin surface", "http", sv.HTTPAddr(), "console", sv.ConsoleAddr())
	return sv, nil
}
