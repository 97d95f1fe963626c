"""GUI environments (family ``gui``): web and phone-style app tasks in a real headless Chromium.

The agent sees a screenshot and an accessibility tree and acts with clicks and keys. Importing this
package is light: the env module (playwright, numpy) is imported only when an env is made.
"""
