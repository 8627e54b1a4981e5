package pgcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned when initdb or pg_ctl cannot be found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under /usr/lib/postgresql/*/bin; on Debian: apt-get install postgresql")

// SuperUser is the role initdb creates; connections use it over the socket with
// trust authentication, which is safe because the socket directory is private.
const SuperUser = "triage"

// PortDefault only names the socket file: the cluster never listens on TCP.
const PortDefault = 5432

// Options tune a cluster. The zero value is the embedded default.
type Options struct {
	// Fast turns off durability (fsync, synchronous_commit, full_page_writes).
	// Only for throwaway test clusters. Default false.
	Fast bool
	// MaxConnections sets max_connections. Default 200.
	MaxConnections int
	// Database is created if missing after start. Default "triage".
	Database string
	// StartTimeout bounds initdb plus start. Default 60s.
	StartTimeout time.Duration
}

// WithDefaults returns o with zero values replaced by the defaults: the
// one place Options' defaults are resolved. A negative value is left as it
// is, for Start to refuse.
func (o Options) WithDefaults() Options {
	if o.MaxConnections == 0 {
		o.MaxConnections = 200
	}
	if o.Database == "" {
		o.Database = "triage"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	return o
}

// validate refuses what no default can stand for, naming the option.
func (o Options) validate() error {
	if o.MaxConnections < 0 {
		return fmt.Errorf("pgcluster: Options.MaxConnections must not be negative, got %d (0 takes the default)", o.MaxConnections)
	}
	if o.StartTimeout < 0 {
		return fmt.Errorf("pgcluster: Options.StartTimeout must not be negative, got %s (0 takes the default)", o.StartTimeout)
	}
	return nil
}

// Cluster is a running private cluster.
type Cluster struct {
	// Dir is the directory the caller asked for.
	Dir string
	// DataDir is where the cluster really lives (Dir/data, or a shadow directory).
	DataDir string
	// SocketDir holds the Unix socket.
	SocketDir string
	binDir    string
	cred      *syscall.Credential
	database  string
}

// URL is a pgx connection string for the cluster's database.
func (c *Cluster) URL() string {
	q := url.Values{}
	q.Set("host", c.SocketDir)
	q.Set("port", strconv.Itoa(PortDefault))
	q.Set("user", SuperUser)
	q.Set("sslmode", "disable")
	return "postgres:///" + c.database + "?" + q.Encode()
}

// FindBinaries returns the directory holding initdb and pg_ctl: PATH first, then
// the newest /usr/lib/postgresql/N/bin.
func FindBinaries() (string, error) {
	return findBinaries(exec.LookPath, "/usr/lib/postgresql/*/bin")
}

func findBinaries(lookPath func(string) (string, error), versionedBinDirs string) (string, error) {
	if p, err := lookPath("pg_ctl"); err == nil {
		if _, err := lookPath("initdb"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Dir(real), nil
			}
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob(versionedBinDirs)
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Start initialises the cluster in dir if needed, starts it unless it is already
// running, waits until it accepts connections and creates the database. Safe to
// call from several processes at once: they serialise on a lock file.
func Start(ctx context.Context, dir string, opts Options) (*Cluster, error) {
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	c, err := locate(dir)
	if err != nil {
		return nil, err
	}
	c.database = opts.Database
	unlock, err := lockDir(ctx, c.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if _, err := os.Stat(filepath.Join(c.DataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx, opts); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("pgcluster: inspect %s: %w", c.DataDir, err)
	}
	if !c.running(ctx) {
		if err := c.prepareSocketDir(); err != nil {
			return nil, err
		}
		logFile := filepath.Join(c.DataDir, "server.log")
		if err := c.pgctl(ctx, "start", "-w", "-t", "60", "-l", logFile); err != nil {
			return nil, fmt.Errorf("pgcluster: start cluster in %s (server log: %s): %w", c.DataDir, logFile, err)
		}
	}
	if err := c.ensureDatabase(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Open returns the cluster in dir without starting it, for Stop and status.
func Open(dir string) (*Cluster, error) { return locate(dir) }

// Running reports whether the cluster's server is up.
func (c *Cluster) Running(ctx context.Context) bool { return c.running(ctx) }

// Stop stops the server (fast shutdown). Stopping a stopped cluster is not an error.
func (c *Cluster) Stop(ctx context.Context) error {
	if !c.running(ctx) {
		return nil
	}
	if err := c.pgctl(ctx, "stop", "-w", "-m", "fast"); err != nil {
		return fmt.Errorf("pgcluster: stop cluster in %s: %w", c.DataDir, err)
	}
	return nil
}

// Remove stops the cluster and deletes its files (test clusters).
func (c *Cluster) Remove(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	if c.DataDir != filepath.Join(c.Dir, "data") {
		if err := os.RemoveAll(filepath.Dir(c.DataDir)); err != nil {
			return fmt.Errorf("pgcluster: remove %s: %w", c.DataDir, err)
		}
	}
	if c.SocketDir != c.DataDir && strings.HasPrefix(c.SocketDir, os.TempDir()) {
		_ = os.RemoveAll(c.SocketDir)
	}
	return os.RemoveAll(c.Dir)
}

// ShadowBase is where a cluster lives when the server's OS user cannot
// enter the requested directory: a place tmp cleaners leave alone.
// LegacyShadowBase is where earlier versions put it; a cluster found there
// is still used.
const (
	ShadowBase       = "/var/lib/triage"
	LegacyShadowBase = "/var/tmp"
)

// Shadow reports whether the cluster's files live outside Dir (in a shadow
// directory the server's OS user can enter).
func (c *Cluster) Shadow() bool { return c.DataDir != filepath.Join(c.Dir, "data") }

// Exists reports whether a cluster was initialised for dir (in dir itself
// or in its shadow directory), without creating or starting anything.
func Exists(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for _, d := range append([]string{filepath.Join(abs, "data")}, shadowDataDirs(abs)...) {
		if _, err := os.Stat(filepath.Join(d, "PG_VERSION")); err == nil {
			return true
		}
	}
	return false
}

// shadowDataDirs are the data directories a shadowed cluster for abs may
// have, preferred first.
func shadowDataDirs(abs string) []string {
	sum := sha256.Sum256([]byte(abs))
	name := "triage-pg-" + hex.EncodeToString(sum[:6])
	return []string{filepath.Join(ShadowBase, name, "data"), filepath.Join(LegacyShadowBase, name, "data")}
}

func locate(dir string) (*Cluster, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: data directory %q: %w", dir, err)
	}
	binDir, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("pgcluster: create %s: %w", abs, err)
	}
	c := &Cluster{Dir: abs, binDir: binDir, database: "triage"}
	c.DataDir = filepath.Join(abs, "data")
	if os.Geteuid() == 0 {
		cred, err := serverUser()
		if err != nil {
			return nil, err
		}
		c.cred = cred
		if !traversable(abs, cred) {
			shadow, err := shadowDir(abs, cred)
			if err != nil {
				return nil, err
			}
			c.DataDir = filepath.Join(shadow, "data")
			note := fmt.Sprintf("The PostgreSQL server runs as uid %d, which cannot enter %s,\nso this cluster's files live in %s.\n"+
				"`triage db stop --remove --dir %s` removes both.\n", cred.Uid, abs, c.DataDir, abs)
			_ = os.WriteFile(filepath.Join(abs, "WHERE.txt"), []byte(note), 0o644)
		}
	}
	c.SocketDir = filepath.Dir(c.DataDir)
	// A Unix socket path is limited to 107 bytes; keep a margin for ".s.PGSQL.5432".
	if len(c.SocketDir) > 80 {
		sum := sha256.Sum256([]byte(abs))
		c.SocketDir = filepath.Join(os.TempDir(), "triage-s-"+hex.EncodeToString(sum[:6]))
	}
	return c, nil
}

// shadowDir returns (creating it) the directory a cluster for abs lives in
// when cred cannot enter abs: an existing one (also at the legacy place)
// first, else under ShadowBase, else under LegacyShadowBase.
func shadowDir(abs string, cred *syscall.Credential) (string, error) {
	candidates := shadowDataDirs(abs)
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "PG_VERSION")); err == nil {
			return filepath.Dir(d), nil
		}
	}
	var lastErr error
	for _, d := range candidates {
		shadow := filepath.Dir(d)
		if err := os.MkdirAll(filepath.Dir(shadow), 0o755); err != nil {
			lastErr = err
			continue
		}
		if !traversable(filepath.Dir(shadow), cred) {
			lastErr = fmt.Errorf("uid %d cannot enter %s", cred.Uid, filepath.Dir(shadow))
			continue
		}
		if err := os.MkdirAll(shadow, 0o700); err != nil {
			lastErr = err
			continue
		}
		if err := os.Chown(shadow, int(cred.Uid), int(cred.Gid)); err != nil {
			return "", fmt.Errorf("pgcluster: chown %s: %w", shadow, err)
		}
		return shadow, nil
	}
	return "", fmt.Errorf("pgcluster: create a shadow directory for %s: %w", abs, lastErr)
}

func (c *Cluster) prepareSocketDir() error {
	if err := os.MkdirAll(c.SocketDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: create socket directory %s: %w", c.SocketDir, err)
	}
	if c.cred != nil {
		if err := os.Chown(c.SocketDir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: chown %s: %w", c.SocketDir, err)
		}
	}
	return nil
}

// serverUser picks the unprivileged account the server runs as when we are root.
func serverUser() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("pgcluster: running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")
}

// traversable reports whether cred can reach dir: every ancestor must grant it
// search (x) permission.
func traversable(dir string, cred *syscall.Credential) bool {
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return false
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := st.Mode().Perm()
		var can bool
		switch {
		case sys.Uid == cred.Uid:
			can = mode&0o100 != 0
		case sys.Gid == cred.Gid:
			can = mode&0o010 != 0
		default:
			can = mode&0o001 != 0
		}
		if !can {
			return false
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

func (c *Cluster) initdb(ctx context.Context, opts Options) error {
	parent := filepath.Dir(c.DataDir)
	if c.cred != nil {
		if err := os.Chown(parent, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: chown %s: %w", parent, err)
		}
	}
	_ = os.RemoveAll(c.DataDir) // a half-finished earlier initdb
	cmd := c.command(ctx, filepath.Join(c.binDir, "initdb"),
		"-D", c.DataDir, "-U", SuperUser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: initdb %s: %w: %s", c.DataDir, err, lastLines(out, 5))
	}
	conf := fmt.Sprintf("\n# written by triage's pgcluster\nlisten_addresses = ''\nport = %d\nunix_socket_directories = '%s'\nmax_connections = %d\nshared_buffers = 128MB\n",
		PortDefault, c.SocketDir, opts.MaxConnections)
	if opts.Fast {
		conf += "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
	}
	f, err := os.OpenFile(filepath.Join(c.DataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: configure: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(conf); err != nil {
		return fmt.Errorf("pgcluster: configure: %w", err)
	}
	return f.Close()
}

func (c *Cluster) running(ctx context.Context) bool {
	if _, err := os.Stat(filepath.Join(c.DataDir, "PG_VERSION")); err != nil {
		return false
	}
	return c.command(ctx, filepath.Join(c.binDir, "pg_ctl"), "status", "-D", c.DataDir).Run() == nil
}

func (c *Cluster) pgctl(ctx context.Context, args ...string) error {
	full := append([]string{args[0], "-D", c.DataDir}, args[1:]...)
	cmd := c.command(ctx, filepath.Join(c.binDir, "pg_ctl"), full...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", args[0], err, lastLines(out, 5))
	}
	return nil
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "LANG=C"}
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	// The server outlives this process (pg_ctl daemonises it); only pg_ctl itself
	// is bound to ctx.
	return cmd
}

func (c *Cluster) ensureDatabase(ctx context.Context) error {
	q := url.Values{}
	q.Set("host", c.SocketDir)
	q.Set("port", strconv.Itoa(PortDefault))
	q.Set("user", SuperUser)
	conn, err := pgx.Connect(ctx, "postgres:///postgres?"+q.Encode())
	if err != nil {
		return fmt.Errorf("pgcluster: connect to %s: %w", c.SocketDir, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.database).Scan(&exists); err != nil {
		return fmt.Errorf("pgcluster: look up database %s: %w", c.database, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.database}.Sanitize()); err != nil {
		var already bool
		_ = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.database).Scan(&already)
		if !already {
			return fmt.Errorf("pgcluster: create database %s: %w", c.database, err)
		}
	}
	return nil
}

func lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: lock %s: %w", dir, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("pgcluster: lock %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("pgcluster: waiting for another process starting the cluster in %s: %w", dir, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
