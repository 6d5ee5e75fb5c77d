"""The precision recipe's choice: autotune checked against an independent probe, and the default
rule table."""
