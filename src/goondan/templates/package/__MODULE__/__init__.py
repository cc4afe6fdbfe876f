"""The __NAME__ Goondan package: goondan.yaml next to this file declares its resources."""
