package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// npmSource is where the npm workload's packages come from: npm's own
// dependencies, installed on every machine that has npm, so the bench
// downloads nothing.
const npmSource = "/usr/lib/node_modules/npm/node_modules"

// packScript packs the packages of a node_modules dir (argv[2]) into
// argv[3]/vendor as npm-style tarballs (package/ at the top) and writes
// argv[3]/proj/package.json depending on each as a file: tarball. It
// keeps only packages whose dependencies the kept set satisfies (npm's
// own semver decides), so that npm resolves every edge offline; packages
// with a nested node_modules (a second version of something) are left
// out. It prints the number of packages kept.
const packScript = `
const fs = require('fs'), path = require('path'), cp = require('child_process');
const [root, out] = process.argv.slice(2);
const semver = require(path.join(root, 'semver'));
let pkgs = [];
for (const e of fs.readdirSync(root).sort()) {
  if (e.startsWith('.')) continue;
  const dirs = e.startsWith('@') ? fs.readdirSync(path.join(root, e)).sort().map(s => path.join(e, s)) : [e];
  for (const d of dirs) {
    const dir = path.join(root, d);
    if (fs.existsSync(path.join(dir, 'node_modules'))) continue;
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'package.json')));
    pkgs.push({ dir, name: m.name, version: m.version, deps: m.dependencies || {} });
  }
}
for (let changed = true; changed;) {
  const have = new Map(pkgs.map(p => [p.name, p.version]));
  const next = pkgs.filter(p => Object.entries(p.deps).every(([n, r]) => have.has(n) && semver.satisfies(have.get(n), r)));
  changed = next.length !== pkgs.length;
  pkgs = next;
}
fs.mkdirSync(path.join(out, 'vendor'), { recursive: true });
fs.mkdirSync(path.join(out, 'proj'), { recursive: true });
const deps = {};
for (const p of pkgs) {
  const tgz = p.name.replace('@', '').replace('/', '-') + '-' + p.version + '.tgz';
  cp.execFileSync('tar', ['czf', path.join(out, 'vendor', tgz), '--sort=name', '--owner=0', '--group=0',
    '--mtime=2024-01-01', '--transform', 's,^\\.,package,', '-C', p.dir, '.']);
  deps[p.name] = 'file:../vendor/' + tgz;
}
fs.writeFileSync(path.join(out, 'proj', 'package.json'),
  JSON.stringify({ name: 'proj', version: '1.0.0', private: true, dependencies: deps }, null, 2) + '\n');
console.log(pkgs.length);
`

// npmInstall is the measured command: an install from the lockfile, no
// node_modules there yet, every package in npm's cache.
const npmInstall = `cd npm/proj && npm install --offline --no-audit --no-fund --no-update-notifier --loglevel=error >/dev/null`

// npmProject makes the npm workload's project in dir/src (vendor/ with
// the tarballs, proj/ with package.json and the package-lock.json of a
// first install) and warms npm's cache in dir/cache with that install,
// made in a copy that is thrown away. It returns the project, the
// environment that points npm at the cache, and what it installs.
func npmProject(dir string) (src string, env []string, what string, err error) {
	for _, tool := range []string{"node", "npm", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", nil, "", fmt.Errorf("%s is not installed", tool)
		}
	}
	if _, err := os.Stat(filepath.Join(npmSource, "semver")); err != nil {
		return "", nil, "", fmt.Errorf("no npm packages at %s: %v", npmSource, err)
	}
	src, cache := filepath.Join(dir, "src"), filepath.Join(dir, "cache")
	env = []string{"npm_config_cache=" + cache, "npm_config_update_notifier=false"}
	c := exec.Command("node", "-", npmSource, filepath.Join(src, "npm"))
	c.Stdin = strings.NewReader(packScript)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", nil, "", fmt.Errorf("packing npm's packages: %v: %s", err, stderr.String())
	}
	warm := filepath.Join(dir, "warm")
	if err := exec.Command("cp", "-a", src, warm).Run(); err != nil {
		return "", nil, "", err
	}
	defer os.RemoveAll(warm)
	if err := shEnv(warm, env, npmInstall); err != nil {
		return "", nil, "", fmt.Errorf("warming npm's cache: %w", err)
	}
	if err := exec.Command("cp", filepath.Join(warm, "npm/proj/package-lock.json"), filepath.Join(src, "npm/proj/")).Run(); err != nil {
		return "", nil, "", err
	}
	files, bytes := 0, int64(0)
	_ = filepath.Walk(filepath.Join(warm, "npm/proj/node_modules"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			files++
			bytes += fi.Size()
		}
		return nil
	})
	what = fmt.Sprintf("%s packages of %s as file: tarballs (%d files, %.1f MiB installed)",
		strings.TrimSpace(string(out)), npmSource, files, float64(bytes)/(1<<20))
	return src, env, what, nil
}

// shEnv is sh with env added to this process's environment.
func shEnv(dir string, env []string, script string) error {
	c := exec.Command("sh", "-c", script)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", script, err, stderr.String())
	}
	return nil
}
