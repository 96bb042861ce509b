package report

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gpuprep/gpuprep/internal/plural"
)

// Cut says how much of a fleet run a report file cut off mid-run holds.
type Cut struct {
	Hosts int // hosts whose entries are whole in the file
	Of    int // hosts the run set out to finish (0: the file does not say)
}

// String is "incomplete: 5 of 200 hosts, cut off".
func (c *Cut) String() string {
	if c.Of > 0 {
		return fmt.Sprintf("incomplete: %d of %s, cut off", c.Hosts, plural.N(c.Of, "host"))
	}
	return fmt.Sprintf("incomplete: %s, cut off", plural.N(c.Hosts, "host"))
}

// cutFleet reads a fleet report file its run did not finish (a
// FleetStream's file when the process was killed): the head, then every
// host entry written whole, up to where the file ends; nil when b is not
// the start of a gpuprep FleetReport ending early. The report is marked
// interrupted and its summary made from the hosts it has.
func cutFleet(b []byte) *Document {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	head, hosts, inHosts := cutFields(dec)
	hb, err := json.Marshal(head)
	if err != nil || !inHosts {
		return nil
	}
	f := &FleetReport{}
	if json.Unmarshal(hb, f) != nil || f.APIVersion != APIVersion || f.Kind != FleetKind {
		return nil
	}
	cut := &Cut{Hosts: len(hosts), Of: f.Planned}
	f.Planned, f.Hosts, f.Interrupted = 0, hosts, true
	f.Finish()
	return &Document{Fleet: f, Cut: cut}
}

// cutFields reads a fleet report's top-level fields up to where the file
// ends: each field of the head written whole, then the host entries written
// whole; inHosts is false when the file ends before the hosts' array.
func cutFields(dec *json.Decoder) (head map[string]json.RawMessage, hosts []FleetHost, inHosts bool) {
	head = map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			break
		}
		if key == "hosts" {
			hosts, inHosts = wholeHosts(dec)
			break
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		head[key] = v
	}
	return head, hosts, inHosts
}

// wholeHosts reads the entries of the hosts' array written whole; false
// when what follows is no array.
func wholeHosts(dec *json.Decoder) ([]FleetHost, bool) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, false
	}
	var hosts []FleetHost
	for dec.More() {
		var h FleetHost
		if dec.Decode(&h) != nil {
			break
		}
		hosts = append(hosts, h)
	}
	return hosts, true
}
