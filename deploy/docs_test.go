package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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

func TestDockerignore(t *testing.T) {
	lines := map[string]bool{}
	for _, l := range strings.Split(readFile(t, "../.dockerignore"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines[l] = true
		}
	}
	for _, want := range []string{".git", "bin/", "data/"} {
		if !lines[want] {
			t.Errorf(".dockerignore does not list %s", want)
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
