"""The `localneuron` command: run a script on the device with a portability report, show the setup."""
