package fleet

import (
	"fmt"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kevinburke/ssh_config"
)

// Select returns the hosts matching limit and groups, in inventory order.
//
// limit is a list of patterns separated by commas or colons (as Ansible's
// --limit): each a shell glob matched against the host name, its address
// or one of its groups; a pattern starting with ! excludes, one starting
// with & must also match. groups (any of them) further restricts the
// selection. Empty limit and groups select every host.
func Select(hosts []*Host, limit string, groups []string) ([]*Host, error) {
	var incl, excl, inter []string
	for _, p := range strings.FieldsFunc(limit, func(r rune) bool { return r == ',' || r == ':' }) {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		dst := &incl
		switch p[0] {
		case '!':
			dst, p = &excl, p[1:]
		case '&':
			dst, p = &inter, p[1:]
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("--limit %q: %v", p, err)
		}
		*dst = append(*dst, p)
	}
	match := func(h *Host, p string) bool {
		if p == "all" || p == "*" {
			return true
		}
		for _, s := range append([]string{h.Name, h.Address}, h.Groups...) {
			if ok, _ := path.Match(p, s); ok {
				return true
			}
		}
		return false
	}
	any := func(h *Host, ps []string) bool {
		for _, p := range ps {
			if match(h, p) {
				return true
			}
		}
		return false
	}
	known := map[string]bool{}
	for _, h := range hosts {
		for _, g := range h.Groups {
			known[g] = true
		}
	}
	for _, g := range groups {
		if !known[g] && g != "all" {
			return nil, fmt.Errorf("--group %q: no host is in that group", g)
		}
	}
	var out []*Host
	for _, h := range hosts {
		if len(incl) > 0 && !any(h, incl) {
			continue
		}
		if any(h, excl) {
			continue
		}
		ok := true
		for _, p := range inter {
			ok = ok && match(h, p)
		}
		if !ok {
			continue
		}
		if len(groups) > 0 && !contains(groups, "all") {
			in := false
			for _, g := range groups {
				in = in || contains(h.Groups, g)
			}
			if !in {
				continue
			}
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no host matches --limit %q / --group %v", limit, groups)
	}
	return out, nil
}

// SSHConfig is a parsed ssh_config file (~/.ssh/config).
type SSHConfig struct {
	cfg *ssh_config.Config
}

// LoadSSHConfig reads an ssh_config file; a missing file is an empty config.
func LoadSSHConfig(file string) (*SSHConfig, error) {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return &SSHConfig{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := ssh_config.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return &SSHConfig{cfg: c}, nil
}

func (s *SSHConfig) get(alias, key string) string {
	if s == nil || s.cfg == nil {
		return ""
	}
	v, _ := s.cfg.Get(alias, key)
	return v
}

func (s *SSHConfig) getAll(alias, key string) []string {
	if s == nil || s.cfg == nil {
		return nil
	}
	v, _ := s.cfg.GetAll(alias, key)
	return v
}

// Apply fills what the inventory left open from the ssh_config entry of the
// host's address, as ssh would when given that address: HostName, User,
// Port, IdentityFile and ProxyJump. Values the inventory sets win, as the
// options Ansible passes on ssh's command line do.
func (s *SSHConfig) Apply(h *Host) error {
	alias := h.Address
	if alias == "" {
		alias = h.Name
	}
	if hn := s.get(alias, "HostName"); hn != "" {
		h.Address = expandTokens(hn, alias, "", 0)
	}
	if h.User == "" {
		h.User = s.get(alias, "User")
	}
	if h.Port == 0 {
		if p := s.get(alias, "Port"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return fmt.Errorf("ssh config: Host %s: Port %q is not a TCP port", alias, p)
			}
			h.Port = n
		}
	}
	if len(h.IdentityFiles) == 0 {
		for _, f := range s.getAll(alias, "IdentityFile") {
			h.IdentityFiles = append(h.IdentityFiles, expandTokens(f, alias, h.User, h.Port))
		}
	}
	if h.Jump == "" {
		if j := s.get(alias, "ProxyJump"); j != "" && !strings.EqualFold(j, "none") {
			h.Jump = j
		}
	}
	return nil
}

// Defaults fills the user (the local user) and port (22) when still unset.
func Defaults(h *Host) {
	if h.User == "" {
		h.User = localUser()
	}
	if h.Port == 0 {
		h.Port = 22
	}
}

func localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// expandTokens expands ~ and the ssh_config tokens %h %u %r %p %d %%.
func expandTokens(s, hostname, remoteUser string, port int) string {
	home, _ := os.UserHomeDir()
	if s == "~" || strings.HasPrefix(s, "~/") {
		s = filepath.Join(home, s[1:])
	}
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'h':
			b.WriteString(hostname)
		case 'r':
			b.WriteString(remoteUser)
		case 'u':
			b.WriteString(localUser())
		case 'p':
			if port == 0 {
				port = 22
			}
			b.WriteString(strconv.Itoa(port))
		case 'd':
			b.WriteString(home)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// JumpHop is one hop of a ProxyJump chain.
type JumpHop struct {
	User    string
	Address string
	Port    int
	// IdentityFiles from ssh_config for the hop.
	IdentityFiles []string
}

// ParseJump parses a ProxyJump spec ([user@]host[:port], comma-separated;
// ssh://user@host:port also accepted), resolving each hop through cfg.
func ParseJump(spec string, cfg *SSHConfig) ([]JumpHop, error) {
	var hops []JumpHop
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "ssh://"))
		if part == "" {
			return nil, fmt.Errorf("jump %q: empty hop", spec)
		}
		h := &Host{}
		if u, rest, ok := strings.Cut(part, "@"); ok {
			h.User, part = u, rest
		}
		hostPart := part
		if strings.HasPrefix(part, "[") {
			end := strings.IndexByte(part, ']')
			if end < 0 {
				return nil, fmt.Errorf("jump %q: bad address", spec)
			}
			hostPart = part[1:end]
			if rest := part[end+1:]; strings.HasPrefix(rest, ":") {
				n, err := strconv.Atoi(rest[1:])
				if err != nil {
					return nil, fmt.Errorf("jump %q: bad port", spec)
				}
				h.Port = n
			}
		} else if i := strings.LastIndexByte(part, ':'); i >= 0 && strings.Count(part, ":") == 1 {
			n, err := strconv.Atoi(part[i+1:])
			if err != nil || n <= 0 || n > 65535 {
				return nil, fmt.Errorf("jump %q: %q is not a TCP port", spec, part[i+1:])
			}
			hostPart, h.Port = part[:i], n
		}
		if hostPart == "" || strings.ContainsAny(hostPart, " \t\r\n/") || strings.HasPrefix(hostPart, "-") {
			return nil, fmt.Errorf("jump %q: %q is not a host", spec, hostPart)
		}
		h.Address = hostPart
		if err := cfg.Apply(h); err != nil {
			return nil, err
		}
		Defaults(h)
		hops = append(hops, JumpHop{User: h.User, Address: h.Address, Port: h.Port, IdentityFiles: h.IdentityFiles})
	}
	return hops, nil
}
