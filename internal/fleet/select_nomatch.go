package fleet

import (
	"fmt"
	"strings"
)

// noMatch is the error for a selection that leaves no host: the flags that
// were given, as the user wrote them (no empty list printed as "[]").
func noMatch(limit string, groups []string) error {
	var by []string
	if limit != "" {
		by = append(by, fmt.Sprintf("--limit %q", limit))
	}
	if len(groups) > 0 {
		by = append(by, "--group "+strings.Join(groups, ","))
	}
	if len(by) == 0 {
		return fmt.Errorf("no host to run on")
	}
	return fmt.Errorf("no host matches %s", strings.Join(by, " and "))
}
