package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Issue 16 point 11: the build context, the image's version, the one copy
// of the Compose file, and the Go version and module path the docs state.

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDockerignore: the build context leaves out the history and every
// line of .gitignore (build outputs, make run's data folder), so no
// binary built in the checkout goes to the daemon. Docker reads a leading
// / as the context's root, as git does; a git pattern without a / matches
// at any depth, which Docker writes **/pattern.
func TestDockerignore(t *testing.T) {
	lines := func(path string) []string {
		var out []string
		for _, l := range strings.Split(readFile(t, path), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
		return out
	}
	docker := map[string]bool{}
	for _, l := range lines("../.dockerignore") {
		docker[strings.TrimPrefix(l, "/")] = true
	}
	want := []string{".git", "bin/", "data/"}
	for _, l := range lines("../.gitignore") {
		if strings.Contains(strings.TrimSuffix(l, "/"), "/") {
			want = append(want, strings.TrimPrefix(l, "/"))
		} else {
			want = append(want, "**/"+l)
		}
	}
	for _, w := range want {
		if !docker[w] {
			t.Errorf(".dockerignore does not list %s", w)
		}
	}
}

// TestDockerfileVersion builds rlserver with the Dockerfile's own -ldflags
// and a VERSION build argument, and asks it its version.
func TestDockerfileVersion(t *testing.T) {
	src := readFile(t, "../Dockerfile")
	if !regexp.MustCompile(`(?m)^ARG VERSION(=\S*)?$`).MatchString(src) {
		t.Fatal("Dockerfile has no ARG VERSION")
	}
	m := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(src)
	if m == nil || !strings.Contains(m[1], "-X main.version=${VERSION}") {
		t.Fatalf("Dockerfile's go build does not set main.version from VERSION: %v", m)
	}
	ldflags := strings.ReplaceAll(m[1], "${VERSION}", "v9.8.7-deploytest")
	bin := filepath.Join(t.TempDir(), "rlserver")
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, "../cmd/rlserver").CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", ldflags, err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "rlserver v9.8.7-deploytest" {
		t.Errorf("--version: %q, %v", out, err)
	}
	for _, doc := range []string{"../docs/cluster.md", "../Dockerfile"} {
		if !strings.Contains(readFile(t, doc), "docker build --build-arg VERSION=$(git describe --tags --always)") {
			t.Errorf("%s does not say how to set the image's version", doc)
		}
	}
}

func TestDockerComposeVersionArg(t *testing.T) {
	docs := yamlDocs(t, "docker-compose.yml")
	x, _ := docs[0]["x-rlserver"].(map[any]any)
	build, _ := x["build"].(map[any]any)
	args, _ := build["args"].(map[any]any)
	if build["context"] != ".." || args["VERSION"] != "${VERSION:-docker}" {
		t.Errorf("build %v: want context .. and the VERSION argument", x["build"])
	}
}

// TestClusterDocsCompose: docs/cluster.md links to deploy/docker-compose.yml
// rather than keeping a copy (which drifted: it had lost the metrics and
// health checks), and gives the command the file's own header gives.
func TestClusterDocsCompose(t *testing.T) {
	doc := readFile(t, "../docs/cluster.md")
	if !strings.Contains(doc, "(../deploy/docker-compose.yml)") {
		t.Error("docs/cluster.md does not link to ../deploy/docker-compose.yml")
	}
	for _, copied := range []string{"x-rlserver", "RL_PEERS:", "services:"} {
		if strings.Contains(doc, copied) {
			t.Errorf("docs/cluster.md holds a copy of the compose file (%q)", copied)
		}
	}
	m := regexp.MustCompile(`(?m)^#\s+(VERSION=.*docker compose .*)$`).FindStringSubmatch(readFile(t, "docker-compose.yml"))
	if m == nil {
		t.Fatal("docker-compose.yml's header gives no command")
	}
	if !strings.Contains(doc, "\n"+m[1]+"\n") {
		t.Errorf("docs/cluster.md does not give the compose file's command %q", m[1])
	}
}

// goModule returns go.mod's module path and go version.
func goModule(t *testing.T) (module, version string) {
	t.Helper()
	src := readFile(t, "../go.mod")
	mod := regexp.MustCompile(`(?m)^module (\S+)$`).FindStringSubmatch(src)
	ver := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(src)
	if mod == nil || ver == nil {
		t.Fatal("go.mod has no module or go line")
	}
	return mod[1], ver[1]
}

// TestDocsGoVersion: every "Go 1.x" in README and docs/client.md is go.mod's
// go line (README said "Go (1.26)" while go.mod needs 1.26.8).
func TestDocsGoVersion(t *testing.T) {
	_, ver := goModule(t)
	re := regexp.MustCompile(`\bGo \(?(1\.\d+(?:\.\d+)?)`)
	for _, doc := range []string{"../README.md", "../docs/client.md"} {
		found := re.FindAllStringSubmatch(readFile(t, doc), -1)
		if len(found) == 0 {
			t.Errorf("%s states no Go version", doc)
		}
		for _, f := range found {
			if f[1] != ver {
				t.Errorf("%s says %q; go.mod says go %s", doc, f[0], ver)
			}
		}
	}
}

// TestClientDocsDependency: docs/client.md says how to depend on the
// unpublished module, with its real path.
func TestClientDocsDependency(t *testing.T) {
	mod, _ := goModule(t)
	doc := readFile(t, "../docs/client.md")
	for _, want := range []string{
		"go mod edit -require=" + mod + "@v0.0.0 -replace=" + mod + "=../rlserver",
		"go work init . ../rlserver",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/client.md lacks %q", want)
		}
	}
}

// TestAptNoRecommends pins issue 16 point 17: make test and CI install
// their tools without recommended packages (chromium's recommendations
// alone brought avahi, cups helpers and upower; headless Chromium with
// --no-sandbox needs none of them).
func TestAptNoRecommends(t *testing.T) {
	for _, path := range []string{"../Makefile", "../.ci/run"} {
		n := 0
		for i, line := range strings.Split(readFile(t, path), "\n") {
			for _, cmd := range regexp.MustCompile(`apt-get install[^;&|]*`).FindAllString(line, -1) {
				n++
				if !strings.Contains(cmd, " --no-install-recommends") {
					t.Errorf("%s line %d: %s", path, i+1, strings.TrimSpace(cmd))
				}
			}
		}
		if n == 0 {
			t.Errorf("%s installs nothing with apt-get", path)
		}
	}
}

// TestDocsLinks pins issue 16 point 12: every relative link in README.md
// and docs/*.md names a file that exists and, with a #fragment into a
// markdown file, a heading of that file (docs/security.md linked to
// sections that exist only in README). Links in code are not links.
func TestDocsLinks(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(readFile(t, path))
		anchors[path] = a
		return a
	}
	checked := map[string]bool{}
	for _, doc := range append([]string{"../README.md"}, docs...) {
		for _, link := range markdownLinks(readFile(t, doc)) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			path := filepath.Clean(doc)
			if target != "" {
				path = filepath.Join(filepath.Dir(doc), target)
			}
			checked[filepath.Base(doc)+" -> "+link] = true
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s: no such file", doc, link)
				continue
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[frag] {
				t.Errorf("%s links to %s: %s has no heading #%s", doc, link, path, frag)
			}
		}
	}
	// The check sees links across lines and to README's sections.
	for _, want := range []string{"security.md -> ../README.md#input-limits", "README.md -> docs/cluster.md#faults-at-a-glance"} {
		if !checked[want] {
			t.Errorf("link %s not found by the check", want)
		}
	}
}

// markdownLinks returns the destinations of md's inline links and images,
// outside fenced code blocks and code spans.
func markdownLinks(md string) []string {
	var prose strings.Builder
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose.WriteString(codeSpan.ReplaceAllString(line, "") + "\n")
		}
	}
	var links []string
	for _, m := range linkDest.FindAllStringSubmatch(prose.String(), -1) {
		links = append(links, m[1])
	}
	return links
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	linkDest = regexp.MustCompile(`\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)`)
	heading  = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	inlineLk = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives md's headings: the
// heading's text (a link's text for a link) lower-cased, spaces turned to
// '-', punctuation other than '-' and '_' dropped; a repeated anchor gets
// -1, -2, ...
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		text := inlineLk.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocsInstallNote pins issue 16 point 10: a page of docs/ that shows
// an `rlserver ...` command says, near its top, where the binary comes
// from, and points to README's install note.
func TestDocsInstallNote(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	command := regexp.MustCompile(`^\s*(\$ )?(sudo (-u \S+ )?)?rlserver(\s|$)`)
	const note = "Commands here call the server binary `rlserver`: from a clone, `make build` " +
		"puts it at `bin/rlserver` and `go install ./cmd/rlserver` puts it on your " +
		"`PATH` (see the [README](../README.md))."
	pages := 0
	for _, doc := range docs {
		src := readFile(t, doc)
		shows := strings.Contains(src, "`rlserver --")
		fenced := false
		for _, line := range strings.Split(src, "\n") {
			if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				fenced = !fenced
			} else if fenced && command.MatchString(line) {
				shows = true
			}
		}
		if !shows {
			continue
		}
		pages++
		flat := strings.Join(strings.Fields(src), " ")
		i := strings.Index(flat, note)
		if j := strings.Index(flat, "rlserver --"); i < 0 || j >= 0 && j < i {
			t.Errorf("%s shows rlserver commands without the install note before them", doc)
		}
	}
	if pages == 0 {
		t.Error("no page of docs/ shows an rlserver command: the check is broken")
	}
}
