package report

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Formats lists what Render can write.
// Format "nfd" (one host's Node Feature Discovery feature file) is not among
// them: a fleet has no one feature file.
var Formats = []string{"text", "json", "junit", "markdown", "html"}

// Version is gpuprep's version (set by main): the nfd format carries it.
var Version = "dev"

// NFDTTL is how long an nfd feature file written by Render stays valid.
const NFDTTL = time.Hour

// Document is a saved gpuprep JSON report: a host's ReadinessReport or a
// FleetReport.
type Document struct {
	Host  *Report
	Fleet *FleetReport
	// Cut: a fleet report file cut off before its run finished (the run
	// was killed): Fleet holds the hosts it has.
	Cut *Cut
}

// Parse reads a saved report; name is used in errors.
func Parse(name string, b []byte) (*Document, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		if d := cutFleet(b); d != nil {
			if err := checkWidths(name, d); err != nil {
				return nil, err
			}
			return d, nil
		}
		return nil, notJSONObject(name, b, err)
	}
	if head.APIVersion == "" && head.Kind == "" {
		return nil, fmt.Errorf("%s: not a gpuprep report: a JSON object without apiVersion and kind; %s", name, wantReport)
	}
	if head.APIVersion != APIVersion {
		return nil, fmt.Errorf("%s: apiVersion %q, want %q", name, head.APIVersion, APIVersion)
	}
	d := &Document{}
	switch head.Kind {
	case Kind:
		d.Host = &Report{}
		if err := json.Unmarshal(b, d.Host); err != nil {
			return nil, fieldError(name, b, err)
		}
		if err := missingFields(name, Kind, b, "host", "findings"); err != nil {
			return nil, err
		}
	case FleetKind:
		d.Fleet = &FleetReport{}
		if err := json.Unmarshal(b, d.Fleet); err != nil {
			return nil, fieldError(name, b, err)
		}
		if err := missingFields(name, FleetKind, b, "hosts"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: kind %q, want %s or %s", name, head.Kind, Kind, FleetKind)
	}
	if err := checkWidths(name, d); err != nil {
		return nil, err
	}
	return d, nil
}

// AsFleet presents a host report as a fleet of one, so the fleet formats
// (JUnit, Markdown, HTML) serve single hosts too.
func AsFleet(r *Report) *FleetReport {
	f := &FleetReport{Mode: r.Mode, Hosts: []FleetHost{{Name: r.Host.Name, Status: "evaluated", Mode: r.Mode, Report: r}}, single: true}
	f.Finish()
	return f
}

// Render writes d in format, the text report laid out by default.
func Render(w io.Writer, d *Document, format string) error {
	return RenderWith(w, d, format, TextOptions{})
}

// RenderWith writes d in format; o lays out a host's text report.
func RenderWith(w io.Writer, d *Document, format string, o TextOptions) error {
	if d.Host != nil {
		switch format {
		case "text":
			return TextWith(w, d.Host, o)
		case "json":
			return JSON(w, d.Host)
		case "nfd":
			return NFD(w, d.Host, NFDOptions{Version: Version, Expiry: time.Now().Add(NFDTTL)})
		}
		d = &Document{Fleet: AsFleet(d.Host)}
	}
	switch format {
	case "text":
		return FleetTextWith(w, d.Fleet, o)
	case "json":
		return FleetJSON(w, d.Fleet)
	case "junit":
		return FleetJUnit(w, d.Fleet)
	case "markdown":
		return FleetMarkdown(w, d.Fleet)
	case "html":
		return FleetHTML(w, d.Fleet)
	case "nfd":
		return fmt.Errorf("format nfd is one node's feature file: render a host's report, not a fleet's")
	}
	return fmt.Errorf("unknown format %q (want text, json, junit, markdown, html or nfd)", format)
}
