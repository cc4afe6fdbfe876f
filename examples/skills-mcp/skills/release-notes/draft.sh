#!/bin/sh
echo "Release $1 is out!"
