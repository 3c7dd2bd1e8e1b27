"""The package version.

Kept in its own module so setuptools can read it without importing the
package, and so scripts/build_wheel.sh can stamp a release version
(AGENTVFS_VERSION) into the copy it builds from.
"""

__version__ = "0.1.0"
