package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The JUnit XML of kfsniff check, in the Ant/Surefire form CI servers
// read (Jenkins, GitLab, GitHub Actions' test reporters): a testsuite per
// DIR, a testcase per capture, a failure when its expectation does not
// hold, an error when it could not be checked. It is valid against both
// Ant's schema as windyroad/JUnit-Schema writes it (properties, system-out
// and system-err present, at most one failure or error per testcase,
// timestamps without a zone) and the Jenkins xunit plugin's junit-10.xsd
// (times with at most three decimals): cmd/kfsniff/testdata/junit.

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Package    string          `xml:"package,attr"`
	ID         int             `xml:"id,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Hostname   string          `xml:"hostname,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties junitProperties `xml:"properties"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out"`
	SystemErr  string          `xml:"system-err"`
}

type junitProperties struct {
	Property []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// seconds is a duration as the schemas' time: seconds, three decimals.
func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// writeJUnit writes the results of the cases to path, a testsuite per
// directory checked.
func writeJUnit(path string, dirs []string, cases []*checkCase, start time.Time) error {
	host, err := os.Hostname()
	if err != nil || strings.TrimSpace(host) == "" {
		host = "localhost"
	}
	doc := junitSuites{}
	for i, dir := range dirs {
		s := junitSuite{
			Name: "kfsniff check " + dir, Package: "kfsniff", ID: i,
			Timestamp: start.UTC().Format("2006-01-02T15:04:05"), Hostname: host,
			Properties: junitProperties{Property: []junitProperty{{Name: "directory", Value: dir}}},
		}
		var total time.Duration
		for _, c := range cases {
			if c.Suite != i {
				continue
			}
			s.Tests++
			total += c.Time
			// The capture's directory is the class, its file the test.
			tc := junitCase{Name: filepath.Base(c.Name), ClassName: filepath.ToSlash(filepath.Dir(c.Name)), Time: seconds(c.Time)}
			first, _, _ := strings.Cut(strings.TrimSpace(c.details()), "\n")
			switch c.Result() {
			case "FAIL":
				s.Failures++
				tc.Failure = &junitFailure{Message: first, Type: "expectation not held", Text: c.details()}
			case "ERROR":
				s.Errors++
				tc.Error = &junitFailure{Message: first, Type: "not checked", Text: c.details()}
			}
			s.Cases = append(s.Cases, tc)
		}
		s.Time = seconds(total)
		doc.Suites = append(doc.Suites, s)
	}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	b = append([]byte(xml.Header), append(b, '\n')...)
	return writeAtomic(path, func(w io.Writer) error { _, err := w.Write(b); return err })
}
