package report

import "iter"

// eachHost calls fn with each host of f in inventory order: f's Hosts or,
// for a report rendered from its stream, each host's entry read back from
// the stream's file, one at a time and none kept, so that what rendering
// holds does not grow with the fleet. It stops at fn's first error, or at
// the first entry that cannot be read back.
func (f *FleetReport) eachHost(fn func(i int, h *FleetHost) error) error {
	if f.from == nil {
		for i := range f.Hosts {
			if err := fn(i, &f.Hosts[i]); err != nil {
				return err
			}
		}
		return nil
	}
	var buf []byte
	for i := range f.from.at {
		var h FleetHost
		var err error
		if buf, err = f.from.hostInto(i, buf, &h); err != nil {
			return err
		}
		if err := fn(i, &h); err != nil {
			return err
		}
	}
	return nil
}

// hostSeq is f's hosts as an iterator (for a template's range); the first
// error reading one back ends it and is left in *err.
func (f *FleetReport) hostSeq(err *error) iter.Seq2[int, *FleetHost] {
	return func(yield func(int, *FleetHost) bool) {
		stop := errStop{}
		e := f.eachHost(func(i int, h *FleetHost) error {
			if !yield(i, h) {
				return stop
			}
			return nil
		})
		if e != nil && e != error(stop) && *err == nil {
			*err = e
		}
	}
}

type errStop struct{}

func (errStop) Error() string { return "stop" }
